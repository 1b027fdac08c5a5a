# minikafka in a container: `docker compose up` (see docker-compose.yml) or
#   docker build -t minikafka . && docker run -p 9092:9092 -v minikafka-data:/data minikafka
# Clients must reach the broker at the address it advertises: set MINIKAFKA_ADVERTISED_LISTENERS
# (Kafka's advertised.listeners) to e.g. PLAINTEXT://my-host:9092 when not connecting via localhost.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY protocol protocol
COPY storage storage
COPY coordinator coordinator
COPY broker broker
RUN pip install . && rm -rf /app/build

ENV MINIKAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092
VOLUME ["/data"]
EXPOSE 9092
CMD ["minikafka", "serve", "--host", "0.0.0.0", "--port", "9092", "--data-dir", "/data"]
