# vllm_client.py: runs vLLM's own benchmark client (vllm.benchmarks.serve, the
# code behind `vllm bench serve`) from an installed vllm wheel, unchanged,
# without executing vllm/__init__.py (the engine's entry point). Arguments are
# those of `vllm bench serve`.
import argparse
import importlib.util
import pathlib
import sys
import types

root = pathlib.Path(importlib.util.find_spec("vllm").submodule_search_locations[0])
pkg = types.ModuleType("vllm")
pkg.__path__ = [str(root)]
sys.modules["vllm"] = pkg

from vllm.benchmarks.serve import add_cli_args, main  # noqa: E402

parser = argparse.ArgumentParser(prog="vllm bench serve")
add_cli_args(parser)
main(parser.parse_args())
