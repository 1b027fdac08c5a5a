"""Package list for setuptools, computed from the folders; all other metadata lives in pyproject.toml.

The design card keeps the layers as top-level folders (`broker/`, ...) installed as `minikafka.broker`
and so on. pyproject.toml cannot express "every package under these folders, renamed": `packages.find`
would name them `broker.handlers` instead of `minikafka.broker.handlers`, and a hand-written list drifts
(it once lacked `minikafka.coordinator.group`, so the wheel could not start). Here every folder with an
`__init__.py` under a layer is a package, whatever gets added later; `make install-check` checks the
wheel against the source tree.
"""

from __future__ import annotations

from setuptools import find_packages, setup

LAYERS = ("protocol", "storage", "coordinator", "tools", "broker", "pipeline", "testing")

# Mapping only the layer roots is enough: setuptools resolves `minikafka.coordinator.group` to
# `coordinator/group` through its parent's entry, and the editable install maps exactly these.
PACKAGE_DIR = {f"minikafka.{layer}": layer for layer in LAYERS}
PACKAGES = [
    f"minikafka.{package}"
    for package in find_packages(include=[pattern for layer in LAYERS for pattern in (layer, f"{layer}.*")])
]

setup(packages=PACKAGES, package_dir=PACKAGE_DIR)
