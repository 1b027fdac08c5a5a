FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY protocol protocol
COPY storage storage
COPY coordinator coordinator
COPY broker broker
RUN pip install --no-cache-dir .
EXPOSE 9092
VOLUME ["/data"]
ENV MINIKAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    MINIKAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092
CMD ["minikafka", "serve", "--data-dir", "/data", "--log-format", "json"]
