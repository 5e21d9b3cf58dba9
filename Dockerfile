# policybot: one image for the bot, the workers and migrations.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    POLICYBOT_HOME=/data \
    POLICYBOT_CORPUS=/app/datasets/policy-qa

WORKDIR /app
# The CPU build of torch first, so nothing pulls the multi-GB CUDA wheels.
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY crag ./crag
COPY ingestion ./ingestion
COPY workers ./workers
COPY core ./core
COPY application ./application
COPY slack_shared ./slack_shared
COPY console ./console
COPY cli ./cli
COPY devtools ./devtools
COPY migrations ./migrations
COPY samples ./samples
# The labelled corpus every `policybot evaluator train` learns from (docs/evaluator.md); the
# installed packages cannot find it beside themselves, so its place is set.
COPY datasets ./datasets
RUN pip install --no-cache-dir .

VOLUME /data
ENTRYPOINT ["policybot"]
CMD ["--help"]
