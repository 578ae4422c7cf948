"""Toy: a dry run of adding a family (Lumina 2's pipeline class, Z-Image's runtime)."""

from __future__ import annotations

from app.engine.generation.families.flow_params import FLOW_REQUESTS
from app.engine.generation.files.registry import Architecture, FamilySpec, Folder

TOY_ID = Architecture.declare("toy", released="2026-12")

TOY = FamilySpec(
    architecture=TOY_ID,
    label="Toy",
    transformer=True,
    native_size=1024,
    folder=Folder(pipelines=("Lumina2Pipeline",), parts=("transformer", "vae", "scheduler")),
    pipeline="Lumina2Pipeline",
    driven_pipelines=("Lumina2Pipeline",),
    driver="app.engine.generation.families.toy.model:ToyFamily",
    checkpoint_family="toy",
    checkpoint_label="Toy",
    requests=FLOW_REQUESTS,
)

FAMILIES = (TOY,)
