"""Stands in for a vLLM that is not installed: ``make test-fast`` puts ``tests/without_vllm`` first on PYTHONPATH, so
every import of vllm, in the test process and in every command it starts, fails as it would on a machine without
vLLM. The fast tier passing that way shows it needs no vLLM; tests that read vLLM's own files skip."""

raise ModuleNotFoundError("No module named 'vllm' (hidden by tests/without_vllm: the fast tier runs without vLLM)",
                          name="vllm")
