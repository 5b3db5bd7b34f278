# GuideLLM (from PyPI) for the compose `bench` profile: it drives the load
# balancer with a workload and writes its reports to a volume.
ARG RUNTIME_BASE=folio-base:bookworm
FROM ${RUNTIME_BASE}
ARG GUIDELLM_VERSION=0.8.1
# The build machine's CA certificates, staged by deploy/prepare.sh, for pip only.
COPY deploy/context/ca-certificates.crt /tmp/build-ca.crt
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-venv ca-certificates >/dev/null && rm -rf /var/lib/apt/lists/* && \
    python3 -m venv /opt/guidellm && \
    /opt/guidellm/bin/pip install -q --no-cache-dir --disable-pip-version-check \
      --cert /tmp/build-ca.crt "guidellm==${GUIDELLM_VERSION}" && rm /tmp/build-ca.crt && \
    useradd --system --uid 10002 --create-home guidellm
# The results volume takes this folder's owner when it is first mounted.
RUN install -d -o guidellm -g guidellm /results
# Nothing is fetched from the Hugging Face hub: the tokenizer is the served model's folder.
ENV PATH=/opt/guidellm/bin:${PATH} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    PYTHONUNBUFFERED=1
USER guidellm
WORKDIR /home/guidellm
ENTRYPOINT ["guidellm"]
