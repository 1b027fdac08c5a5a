# minikafka in a container: `docker compose up` (see docker-compose.yml) or
#   docker build -t minikafka . && docker run -p 9092:9092 -v minikafka-data:/data minikafka
# Clients must reach the broker at the address it advertises: set MINIKAFKA_ADVERTISED_LISTENERS
# (Kafka's advertised.listeners) to e.g. PLAINTEXT://my-host:9092 when not connecting via localhost.
#
# A thin wrapper over the wheel: the first stage builds it exactly as `make install-check` does in CI
# (python -m build on the whole source tree; .dockerignore keeps .venv, data, node_modules and .git
# out), the second installs that wheel and nothing else from the sources. No Docker engine runs on the
# development or CI machines, so this file itself is not built there; the wheel it installs is tested.
FROM python:3.11-slim AS wheel

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY . .
RUN pip install 'build>=1.2' && python -m build --wheel --outdir /dist .

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY --from=wheel /dist /tmp/dist
RUN pip install /tmp/dist/minikafka-*.whl && rm -rf /tmp/dist

ENV MINIKAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092
VOLUME ["/data"]
EXPOSE 9092
CMD ["minikafka", "serve", "--host", "0.0.0.0", "--port", "9092", "--data-dir", "/data"]
