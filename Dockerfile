# One image for every nexo process: the orchestrator and each server (`nexo serve NAME --http ...`).
FROM python:3.11-slim

# git: the memory server keeps each agent's MEMORY.md in a git repository.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin nexo

WORKDIR /app
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY orchestrator ./orchestrator
COPY servers ./servers
COPY channel_servers ./channel_servers
RUN pip install --no-cache-dir . && mkdir -p /var/lib/nexo /run/nexo && chown nexo:nexo /var/lib/nexo /run/nexo
COPY config/compose.yaml /etc/nexo/agents.yaml

USER nexo
ENV NEXO_STATE_DIR=/var/lib/nexo \
    NEXO_PYTHON=/usr/local/bin/python \
    PYTHONUNBUFFERED=1
CMD ["nexo", "run", "--config", "/etc/nexo/agents.yaml"]
