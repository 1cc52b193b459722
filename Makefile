# Two entry points: `make demo` and `make test`. Both build .venv from scratch when needed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SHARED ?= ../shared

.PHONY: install install-test demo test lint typecheck unit fuzz bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

install-test: $(BIN)/python
	@# tests/remote start a real sshd on loopback (they skip, saying so, where none can be had)
	@test -x /usr/sbin/sshd || { if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo -n"; fi; \
		$$SUDO apt-get install -y -q openssh-server >/dev/null 2>&1 \
		|| { $$SUDO apt-get update -q >/dev/null 2>&1 \
		&& $$SUDO apt-get install -y -q openssh-server >/dev/null 2>&1; } \
		|| echo "note: no sshd (apt-get install openssh-server): tests/remote will skip"; }
	@# tests/report open the HTML reports in Debian's chromium (playwright drives it; no download)
	@test -x /usr/bin/chromium || { if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo -n"; fi; \
		$$SUDO apt-get install -y -q chromium >/dev/null 2>&1 \
		|| { $$SUDO apt-get update -q >/dev/null 2>&1 \
		&& $$SUDO apt-get install -y -q chromium >/dev/null 2>&1; } \
		|| echo "note: no chromium (apt-get install chromium): the report's browser tests will skip"; }
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,realserver]"

demo: install
	@echo "== servedoctor diagnose examples/ (the GLM-5 story's two failures and real public logs)"
	$(BIN)/servedoctor diagnose examples/*.log || test $$? -eq 1   # 1 = failures diagnosed
	@echo "== servedoctor rules"
	$(BIN)/servedoctor rules
	@echo "== servedoctor plan: GLM-5-NVFP4, TP8, RTX PRO 6000 (95 GiB), fp8 KV at 0.95 vs 0.88"
	$(BIN)/servedoctor plan --model tests/plan/fixtures/glm5-nvfp4 --tp 8 --gpu-memory-gib 95 \
		--kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.95 --weights-gib-per-gpu 57.06
	$(BIN)/servedoctor plan --model tests/plan/fixtures/glm5-nvfp4 --tp 8 --gpu-memory-gib 95 \
		--kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.88 --weights-gib-per-gpu 57.06
	@echo "== servedoctor preflight: the same command judged for sm_120 before launch"
	$(BIN)/servedoctor preflight --gpu sm_120 --no-scan --model tests/plan/fixtures/glm5-nvfp4 -- \
		python -m sglang.launch_server --model-path tests/plan/fixtures/glm5-nvfp4 --tp 8 \
		--kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.95 || test $$? -eq 1   # 1 = a blocking risk found
	@echo "== the main job, live on this CPU: a real transformers serve under launch, then fix"
	$(BIN)/pip install -q torch==2.13.0   # the CPU wheel; then the server (realserver extra)
	$(BIN)/pip install -q -e ".[realserver]"
	scripts/demo/live.sh $(BIN)

lint: install-test
	$(BIN)/ruff check --no-cache src tests bench
	$(BIN)/ruff format --no-cache --check src tests bench

typecheck: install-test
	$(BIN)/mypy

unit: install-test
	$(BIN)/pytest -q

test: lint typecheck unit

# Fresh random examples, 25x as many: finds new parser bugs; `make test` stays repeatable.
fuzz: install-test
	HYPOTHESIS_PROFILE=explore $(BIN)/pytest -q -p no:cacheprovider \
		tests/env/test_env_fatbin_fuzz.py tests/diagnose/test_fuzz.py tests/fix/test_ddmin.py

bench: install-test
	$(BIN)/python bench/log_throughput.py
	$(BIN)/python bench/archscan_speed.py
	$(BIN)/python bench/fix_scenarios.py --corpus $(SHARED)/corpus/dev
	$(BIN)/python bench/launch_overhead.py
	@# knowledge and replay, against the previous release when PREV_SRC names its src/
	$(BIN)/python bench/knowledge_eval.py $(if $(PREV_SRC),--baseline-src $(PREV_SRC)) \
		$(SHARED)/corpus/dev tests/corpus/holdout*
	$(BIN)/python bench/replay_resolved.py $(if $(PREV_SRC),--baseline-src $(PREV_SRC)) \
		tests/corpus/holdout*

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
