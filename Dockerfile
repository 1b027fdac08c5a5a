# minikafka in a container: `docker compose up` (see docker-compose.yml) or
#   docker build -t minikafka . && docker run -p 127.0.0.1:9092:9092 -v minikafka-data:/data minikafka
# Clients must reach the broker at the address it advertises: set MINIKAFKA_ADVERTISED_LISTENERS
# (Kafka's advertised.listeners) to e.g. PLAINTEXT://my-host:9092 when not connecting via localhost.
# MINIKAFKA_ADMIN_PORT=8080 turns on the HTTP admin listener (faults, state, metrics, the inspector) on
# the container's loopback; MINIKAFKA_ADMIN_LISTENER_HOST=0.0.0.0 makes it reachable through a published
# port, and then MINIKAFKA_ADMIN_LISTENER_TOKEN (admin.listener.token) is required: whoever reaches the
# listener can make the broker fail.
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
# Healthy once the broker answers ApiVersions over the wire; the start period covers crash recovery of
# a large data volume.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["minikafka", "probe", "--bootstrap-server", "127.0.0.1:9092", "--timeout", "4"]
# The shell only turns MINIKAFKA_ADMIN_PORT into --admin-port (admin.listener.port has no "off" value to
# default to). It removes the variable first, since the broker reads every MINIKAFKA_* variable as a
# configuration key and would warn about `admin.port`; exec leaves minikafka as PID 1, receiving SIGTERM.
CMD ["sh", "-c", "admin_port=${MINIKAFKA_ADMIN_PORT:-}; unset MINIKAFKA_ADMIN_PORT; exec minikafka serve --host 0.0.0.0 --port 9092 --data-dir /data ${admin_port:+--admin-port $admin_port}"]
