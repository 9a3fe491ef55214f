# sglang_client.py: runs SGLang's own benchmark client (sglang.benchmark.serving,
# the code behind `python -m sglang.bench_serving`) from an installed sglang
# wheel, unchanged, without executing sglang/__init__.py: that file and two
# server-side helper modules import torch, which the client never uses. The
# package objects are replaced by empty ones that point at the real files, and
# the one constant taken from a torch-importing module is read from its source.
import importlib.util
import pathlib
import re
import sys
import types

root = pathlib.Path(importlib.util.find_spec("sglang").submodule_search_locations[0])


def stub(name, path=None, **attrs):
    m = types.ModuleType(name)
    if path is not None:
        m.__path__ = [str(path)]
    m.__dict__.update(attrs)
    sys.modules[name] = m


stub("sglang", root)
stub("sglang.srt", root / "srt")
stub("sglang.srt.utils", root / "srt" / "utils")
stub("sglang.srt.disaggregation", root / "srt" / "disaggregation")
src = (root / "srt" / "disaggregation" / "utils.py").read_text()
host = re.search(r'^FAKE_BOOTSTRAP_HOST\s*=\s*"([^"]*)"', src, re.M).group(1)
stub("sglang.srt.disaggregation.utils", FAKE_BOOTSTRAP_HOST=host)

from sglang.benchmark.serving import cli_main  # noqa: E402

cli_main()
