"""torchvision's pure-Python transforms beside the CPU build of torch (tests only)."""

import sys

import torch


def import_torchvision():
    """torchvision, importable beside the CPU build of torch.

    PyPI's torchvision wheels are built against CUDA torch: beside the CPU build their C++ ops do
    not load, and importing torchvision then fails registering fake kernels for two of them. Only
    its pure-Python transforms are used here; defining the two ops' schemas lets the import finish.
    """
    try:
        import torchvision
        return torchvision
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            raise
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    import_torchvision._lib = lib  # the definitions live as long as the library object
    import torchvision
    return torchvision
