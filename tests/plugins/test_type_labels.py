"""The type labels the guide publishes per family are the ones the plugins give.

Labels become ``accelerator_type:<label>`` resources that requests name, so the guide's table
("Type labels: what each built-in family calls a product") is a contract; these tests hold the
plugins to its examples, known products and fallbacks alike.
"""

from __future__ import annotations

import pathlib

import accelkit
import pytest
from accelkit.detect import type_label
from accelkit_plugins import amd, gaudi, intel, nvidia, tpu

GUIDE = (pathlib.Path(__file__).parents[2] / "docs" / "plugin-authoring.md").read_text()


def test_every_amd_product_label_is_an_instinct_label_and_the_guide_names_three() -> None:
    for label in ("AMD-Instinct-MI300X-OAM", "AMD-Instinct-MI210", "AMD-Instinct-MI100"):
        assert label in amd.PRODUCTS.values()
        assert f"`{label}`" in GUIDE


@pytest.mark.parametrize(
    ("facts", "label"),
    [({"device_id": "0x640f"}, "AMD-GPU-640f"), ({"market_name": "AMD Instinct MI400X"}, None)],
)
def test_amd_fallbacks(facts: dict[str, str], label: str | None) -> None:
    device = amd.gpu(accelkit.FakeHost(), 0, facts, None)
    assert device.type_label == (label or "AMD-Instinct-MI400X")
    assert f"`{device.type_label}`" in GUIDE


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000"),
        ("NVIDIA Foo X1", "Foo-X1"),
    ],
)
def test_nvidia_labels_and_fallback(name: str, label: str) -> None:
    assert nvidia.gpu(0, name, "GPU-0", None, None).type_label == label
    assert f"`{label}`" in GUIDE


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("Intel(R) Data Center GPU Max 1550", "Intel-GPU-Max-1550"),
        ("Intel(R) Arc(TM) A770 Graphics", "Intel-Arc-A770"),
    ],
)
def test_intel_labels(name: str, label: str) -> None:
    assert type_label(name, intel.TYPE_LABELS, ("Graphics",), "Intel") == label
    assert f"`{label}`" in GUIDE


@pytest.mark.parametrize(
    ("name", "label"), [("HL-225", "Intel-GAUDI2"), ("GAUDI3", "Intel-GAUDI3"), ("HL-1000", None)]
)
def test_gaudi_labels_and_fallback(name: str, label: str | None) -> None:
    expected = label or "Intel-HL-1000"
    assert type_label(name, gaudi.TYPE_LABELS, prefix="Intel") == expected
    assert f"`{expected}`" in GUIDE


def test_every_tpu_generation_label_is_published() -> None:
    generations = [*tpu.GENERATIONS.values(), *tpu.V2_V3_SUBSYSTEMS.values()]
    for generation in generations:
        assert f"`TPU-{generation.upper()}`" in GUIDE
