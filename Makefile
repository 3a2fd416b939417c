# The two entry points of the README, plus the pieces they are made of.
VENV ?= .stack/venv
BIN := $(VENV)/bin

.PHONY: demo test bootstrap prefetch prebuild lint unit unit-py integration deploy-checks up down status images compose-up compose-demo compose-down dashboard chart-install-check soak

demo: prefetch bootstrap ## Install everything, start the stack, the streaming job, the API, the processors and the connector worker, run the demo
	$(BIN)/metalake stack up --with-processors
	$(BIN)/metalake demo
	@echo "The stack keeps running. Stop it with: $(BIN)/metalake stack down"

# Two lanes, CI's too: two pytest-xdist workers, each on a local stack of its own (tests/_support/lanes.py), so the
# integration tests' waits (outages held on purpose, restarts, Spark drivers' starts) overlap. LANES=0: one lane, the
# whole session in this process (CONTRIBUTING.md). Files go to the workers in the conftest's order (unit tests, then
# the heaviest integration files first: tests/integration/conftest.py), not xdist's most-tests-first.
LANES ?= 2

test: prefetch bootstrap prebuild lint ## Install everything and run every test: unit, then integration on the real stack
	$(BIN)/pytest -n $(LANES) --dist loadfile --no-loadscope-reorder tests/unit tests/integration

bootstrap:
	bash deploy/local/bootstrap.sh

prefetch: ## Fetch Kafka, Trino, FerretDB and Prometheus in the background (from a fresh clone they overlap the bootstrap)
	bash deploy/local/prefetch.sh

prebuild: ## Build Jaeger, helm and hclfmt in the background at low priority (from a fresh clone it overlaps lint and unit tests)
	bash deploy/local/prebuild.sh

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

unit:
	$(BIN)/pytest tests/unit

unit-py: ## The unit tests under another supported Python (3.11-3.14) in .stack/venv-3.X: make unit-py PY=python3.13
	@test -n "$(PY)" || { echo "usage: make unit-py PY=python3.13 (a Python 3.11-3.14 command or path)" >&2; exit 2; }
	bash deploy/local/unit-python.sh $(PY)

integration:
	$(BIN)/pytest tests/integration

deploy-checks: bootstrap ## The Helm chart's and the Terraform's offline checks alone (part of integration; builds helm once)
	$(BIN)/pytest tests/integration/deploy

# Not part of `make test`: a first run builds kube-apiserver and etcd (about 8 CPU-minutes; docs/deploy.md).
chart-install-check: ## The Helm chart installed on a Kubernetes API server built here (both examples; no pod runs)
	bash deploy/helm/install-check.sh

up:
	$(BIN)/metalake stack up --with-job

down:
	$(BIN)/metalake stack down

status:
	$(BIN)/metalake stack status

# Not part of `make test`: an hour of load and faults on the whole platform (docs/benchmarks.md, "Soak").
soak: bootstrap ## One hour at 200 events/s over 50 tenants with a fault every 5 min, on the stack `make demo` leaves running
	$(BIN)/metalake stack up --with-processors
	$(BIN)/python bench/soak.py $(SOAK_ARGS)

dashboard: ## Regenerate the Grafana dashboard (deploy/grafana/metalake.json) from ops/observability/dashboard.py
	$(BIN)/python -m ops.observability.dashboard --out deploy/grafana/metalake.json

# Containers (docs/deploy.md): not part of `make test`. Needs root here (podman with runc, Debian packages).
images: ## Build every image with podman from a Debian base made here (deploy/images/build.sh)
	bash deploy/images/build.sh

compose-up: bootstrap ## One host with Compose: render deploy/compose/.state, start everything, wait until healthy
	PYTHON=$(BIN)/python bash deploy/compose/compose.sh up

compose-demo: ## metalake demo against the Compose deployment
	PYTHON=$(BIN)/python bash deploy/compose/compose.sh demo

compose-down:
	bash deploy/compose/compose.sh down
