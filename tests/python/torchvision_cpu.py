"""torchvision for the tests: bench/torchvision_cpu.py's import_torchvision,
one copy for the tests and the benchmarks."""

import importlib.util
import os

_path = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "torchvision_cpu.py")
_spec = importlib.util.spec_from_file_location("_bench_torchvision_cpu", _path)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
import_torchvision = _module.import_torchvision
