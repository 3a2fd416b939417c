#!/usr/bin/env bash
# `make chart-install-check`: the chart installed on a real Kubernetes API server (docs/deploy.md#the-chart-on-a-real-api-server).
# Builds kube-apiserver and etcd once (deploy/local/fetch/kube.sh), starts them on loopback ports with TLS and client
# certificates made here (the admin's: group system:masters; anonymous requests refused), then for each example
# values file: a namespace of its own with the documented Secrets and claims, every rendered object dry-run created
# with strict field validation, `helm install`, every object read back, each pod template admitted as a pod (Pod
# Security "restricted"). Then stops both servers. No pod runs: there is no scheduler and no kubelet.
# Ports: KUBE_CHECK_PORT (default 26100) + 1, 2 (etcd's client and peer ports) and + 3 (the API server).
set -euo pipefail
REPO_DIR=$(cd "$(dirname "$0")/../.." && pwd)
STACK_DIR="${METALAKE_STACK__DIR:-$REPO_DIR/.stack}"
export STACK_DIR REPO_DIR
BASE=${KUBE_CHECK_PORT:-26100}
ETCD_PORT=$((BASE + 1)) PEER_PORT=$((BASE + 2)) API_PORT=$((BASE + 3))
WORK="$STACK_DIR/kube-check"
PKI="$WORK/pki"
CHART="$REPO_DIR/deploy/helm/metalake"
KUBE="$STACK_DIR/cache/kube/bin"
HELM="$STACK_DIR/cache/helm/bin/helm"
started=$(date +%s)

bash "$REPO_DIR/deploy/local/fetch/helm.sh"
bash "$REPO_DIR/deploy/local/fetch/kube.sh"
bash "$REPO_DIR/deploy/local/fetch/deploy-checks.sh"
PYTHON="$STACK_DIR/cache/deploy-checks/venv/bin/python"

# Everything here holds keys: readable by this user only. A previous run's cluster is thrown away.
umask 077
rm -rf "$WORK"
mkdir -p "$PKI" "$WORK/etcd" "$WORK/out"

# cert NAME SUBJECT EXTENSIONS: a P-256 key and a certificate signed by the run's CA.
cert() {
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$2" \
    -keyout "$PKI/$1.key" -out "$PKI/$1.csr" 2>/dev/null
  printf '%s\n' "$3" > "$PKI/$1.ext"
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 1 \
    -extfile "$PKI/$1.ext" -out "$PKI/$1.crt" 2>/dev/null
}
make_pki() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj "/CN=metalake chart check CA" -keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
  local server="subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth"
  cert etcd "/CN=etcd" "$server"
  cert apiserver "/CN=kube-apiserver" "$server"
  cert apiserver-etcd "/CN=kube-apiserver-etcd-client" "extendedKeyUsage=clientAuth"
  cert admin "/O=system:masters/CN=metalake-chart-check" "extendedKeyUsage=clientAuth"
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"
}

ETCD_PID="" API_PID=""
# stop PID NAME: SIGTERM, then wait up to 30 s (both shut down cleanly on it).
stop() {
  [ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 0
  kill -TERM "$1"
  for _ in $(seq 300); do kill -0 "$1" 2>/dev/null || { echo "$2 stopped"; return 0; }; sleep 0.1; done
  echo "$2 did not stop in 30 s: killed"; kill -KILL "$1"
}
cleanup() { stop "$API_PID" kube-apiserver; stop "$ETCD_PID" etcd; }
trap cleanup EXIT

# wait_ok NAME URL SECONDS PID CERT: until URL answers 200 to the client certificate CERT (while PID runs).
wait_ok() {
  for _ in $(seq "$3"); do
    kill -0 "$4" 2>/dev/null || { tail -20 "$WORK/$1.log"; echo "error: $1 exited (log: $WORK/$1.log)" >&2; exit 1; }
    curl -fsS --cacert "$PKI/ca.crt" --cert "$PKI/$5.crt" --key "$PKI/$5.key" "$2" >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "error: $1 not ready after $3 s (log: $WORK/$1.log)" >&2; exit 1
}

start_etcd() {
  local url="https://127.0.0.1:$ETCD_PORT" peer="https://127.0.0.1:$PEER_PORT"
  "$KUBE/etcd" --name check --data-dir "$WORK/etcd" \
    --listen-client-urls "$url" --advertise-client-urls "$url" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" --initial-cluster "check=$peer" \
    --cert-file "$PKI/etcd.crt" --key-file "$PKI/etcd.key" --trusted-ca-file "$PKI/ca.crt" --client-cert-auth \
    --peer-cert-file "$PKI/etcd.crt" --peer-key-file "$PKI/etcd.key" --peer-trusted-ca-file "$PKI/ca.crt" \
    --peer-client-cert-auth >"$WORK/etcd.log" 2>&1 &
  ETCD_PID=$!
  wait_ok etcd "$url/health" 60 "$ETCD_PID" apiserver-etcd
}

start_apiserver() {
  "$KUBE/kube-apiserver" --bind-address 127.0.0.1 --secure-port "$API_PORT" --advertise-address 127.0.0.1 \
    --etcd-servers "https://127.0.0.1:$ETCD_PORT" --etcd-cafile "$PKI/ca.crt" \
    --etcd-certfile "$PKI/apiserver-etcd.crt" --etcd-keyfile "$PKI/apiserver-etcd.key" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --cert-dir "$PKI/generated" \
    --client-ca-file "$PKI/ca.crt" --anonymous-auth=false --authorization-mode RBAC --profiling=false \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 --endpoint-reconciler-type none >"$WORK/kube-apiserver.log" 2>&1 &
  API_PID=$!
  wait_ok kube-apiserver "https://127.0.0.1:$API_PORT/readyz" 180 "$API_PID" admin
}

# Neither server answers a client without a certificate of the run's CA (and etcd's peer port neither).
refuses_anonymous() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$PKI/ca.crt" "https://127.0.0.1:$API_PORT/api" || true)
  [ "$code" = 401 ] || { echo "error: kube-apiserver answered $code to a request without a certificate" >&2; exit 1; }
  for port in "$ETCD_PORT" "$PEER_PORT"; do
    ! curl -fsS --cacert "$PKI/ca.crt" "https://127.0.0.1:$port/health" >/dev/null 2>&1 \
      || { echo "error: etcd answered on $port without a client certificate" >&2; exit 1; }
  done
  echo "both servers refuse clients without a certificate (kube-apiserver: 401; etcd: TLS handshake)"
}

kubeconfig() {
  cat > "$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: check, cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$PKI/ca.crt"}}]
users: [{name: admin, user: {client-certificate: "$PKI/admin.crt", client-key: "$PKI/admin.key"}}]
contexts: [{name: check, context: {cluster: check, user: admin}}]
current-context: check
EOF
}

helm() {
  HELM_CACHE_HOME="$WORK/helm/cache" HELM_CONFIG_HOME="$WORK/helm/config" HELM_DATA_HOME="$WORK/helm/data" \
    KUBECONFIG="$WORK/kubeconfig" "$HELM" "$@"
}
check() { KUBE_CHECK_SERVER="https://127.0.0.1:$API_PORT" KUBE_CHECK_PKI="$PKI" "$PYTHON" "$REPO_DIR/deploy/helm/install_check.py" "$@"; }

# install EXAMPLE NAMESPACE RELEASE CLAIM...: one example values file on the server, checked.
install() {
  local values="$CHART/examples/$1.yaml" ns=$2 release=$3
  shift 3
  check prepare "$ns" "$@"
  # helm template talks to no server: it is told the server's version (the chart's kubeVersion is checked against it).
  helm template "$release" "$CHART" -n "$ns" -f "$values" --kube-version "$KUBE_VERSION" > "$WORK/out/$ns-template.yaml"
  check dry-run "$ns" "$WORK/out/$ns-template.yaml"
  helm install "$release" "$CHART" -n "$ns" -f "$values" 2>&1 | tee "$WORK/out/$ns-install.txt"
  ! grep -qi '^W[0-9]\|warning' "$WORK/out/$ns-install.txt" || { echo "error: helm install printed warnings" >&2; exit 1; }
  helm get manifest "$release" -n "$ns" > "$WORK/out/$ns-manifest.yaml"
  check verify "$ns" "$WORK/out/$ns-manifest.yaml"
}

# refused WHAT EXPECTED COMMAND NAMESPACE HELM_ARGS...: the pooled example broken by HELM_ARGS (each passes the
# chart's values schema) must fail `install_check.py COMMAND`, for the reason EXPECTED: the checks above can fail.
refused() {
  local what=$1 expected=$2 command=$3 ns=$4
  shift 4
  helm template metalake "$CHART" -n "$ns" -f "$CHART/examples/pooled.yaml" --kube-version "$KUBE_VERSION" "$@" \
    > "$WORK/out/broken.yaml"
  if check "$command" "$ns" "$WORK/out/broken.yaml" > "$WORK/out/broken.txt" 2>&1; then
    echo "error: the check accepted $what" >&2; exit 1
  fi
  grep -q -- "$expected" "$WORK/out/broken.txt" || {
    cat "$WORK/out/broken.txt"; echo "error: $what was refused, but not for the expected reason ($expected)" >&2; exit 1; }
  echo "refused as it must be: $what ($(grep -o -- "$expected.\{0,60\}" "$WORK/out/broken.txt" | head -1))"
}
negative_cases() {
  check prepare metalake-broken
  refused "a field the API does not know" 'unknown field' dry-run metalake-broken \
    --set-json 'stream.tolerations=[{"key":"metalake.io/pool","operator":"Equal","value":"spark","effect":"NoSchedule","tolerationSecond":1}]'
  refused "a CPU request above its limit" 'must be less than or equal to cpu limit' dry-run metalake-broken \
    --set processes.api.resources.requests.cpu=4
  refused "a container allowed to escalate privileges" 'would violate PodSecurity' dry-run metalake-broken \
    --set containerSecurityContext.allowPrivilegeEscalation=true
  # In the installed release's namespace (its service accounts exist): a Secret the documented steps do not create.
  refused "a Secret nobody creates" 'which the documented steps do not create' pods metalake-pooled \
    --set kafka.credentialsSecret=metalake-kafka-credentials
}

make_pki
kubeconfig
start_etcd
echo "etcd $("$KUBE/etcd" --version | head -1 | awk '{print $3}') ready on 127.0.0.1:$ETCD_PORT"
start_apiserver
KUBE_VERSION=$("$KUBE/kube-apiserver" --version | awk '{print $2}')
echo "kube-apiserver $KUBE_VERSION ready on 127.0.0.1:$API_PORT"
refuses_anonymous
install pooled metalake-pooled metalake metalake-checkpoints metalake-trino-rules
install dedicated-tenant metalake-dedicated metalake-globex metalake-checkpoints-globex
negative_cases
cleanup
trap - EXIT
echo "chart-install-check: passed in $(( $(date +%s) - started ))s (both examples installed and checked; no pod runs)"
