"""What accelerator a SageMaker instance type has: its processor, its GPU model and CUDA compute capability, and
GPU count and memory where the SageMaker SDK's table lacks them (stdlib only).

- Processor: the SageMaker SDK's own rule (`sagemaker.image_uris._processor`): family `inf*` -> "inf"
  (AWS Inferentia), `trn*` -> "trn" (AWS Trainium), a family starting with g or p -> "gpu", else "cpu".
- GPU count and memory: the SDK's `image_uri_config/instance_gpu_info.json` (shipped in the image catalog,
  stacks/image_catalog.py) is the maintained source and wins; `GPUS_NOT_IN_SDK` adds the SageMaker types that
  table (sagemaker 2.257) does not list yet, from AWS's accelerated computing instance pages
  (https://aws.amazon.com/ec2/instance-types/g6/, .../g6e/, .../p5/: GPUs and GPU memory in GiB per size).
- Compute capability per GPU model: NVIDIA's CUDA GPUs table (https://developer.nvidia.com/cuda-gpus); the
  family's GPU model from the same AWS pages. vLLM refuses bfloat16 below 8.0 ("Bfloat16 is only supported on
  GPUs with compute capability of at least 8.0", vLLM's platform dtype check).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024


@dataclass(frozen=True)
class Gpu:
    """A family's GPU: its name and CUDA compute capability (None: not an NVIDIA GPU)."""

    name: str
    compute_capability: tuple[int, int] | None

    def supports_bfloat16(self) -> bool:
        return self.compute_capability is not None and self.compute_capability >= (8, 0)


#: SageMaker's GPU families and their GPU.
GPU_FAMILIES: dict[str, Gpu] = {
    "p2": Gpu("NVIDIA K80", (3, 7)),
    "p3": Gpu("NVIDIA V100", (7, 0)),
    "p3dn": Gpu("NVIDIA V100", (7, 0)),
    "p4d": Gpu("NVIDIA A100", (8, 0)),
    "p4de": Gpu("NVIDIA A100", (8, 0)),
    "p5": Gpu("NVIDIA H100", (9, 0)),
    "p5e": Gpu("NVIDIA H200", (9, 0)),
    "p5en": Gpu("NVIDIA H200", (9, 0)),
    "p6-b200": Gpu("NVIDIA B200", (10, 0)),
    "g4dn": Gpu("NVIDIA T4", (7, 5)),
    "g4ad": Gpu("AMD Radeon Pro V520", None),
    "g5": Gpu("NVIDIA A10G", (8, 6)),
    "g5n": Gpu("NVIDIA A10G", (8, 6)),
    "g6": Gpu("NVIDIA L4", (8, 9)),
    "g6e": Gpu("NVIDIA L40S", (8, 9)),
}

#: {instance type: [GPU count, MiB per GPU]} of SageMaker GPU types the SDK's instance_gpu_info.json lacks.
GPUS_NOT_IN_SDK: dict[str, list[int]] = {
    **{f"ml.g6.{size}": [1, 24 * GIB] for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "ml.g6.12xlarge": [4, 24 * GIB],
    "ml.g6.24xlarge": [4, 24 * GIB],
    "ml.g6.48xlarge": [8, 24 * GIB],
    **{f"ml.g6e.{size}": [1, 48 * GIB] for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "ml.g6e.12xlarge": [4, 48 * GIB],
    "ml.g6e.24xlarge": [4, 48 * GIB],
    "ml.g6e.48xlarge": [8, 48 * GIB],
    "ml.p5e.48xlarge": [8, 141 * GIB],
    "ml.p5en.48xlarge": [8, 141 * GIB],
}

ACCELERATOR_NAMES = {"inf": "an AWS Inferentia (Neuron)", "trn": "an AWS Trainium (Neuron)", "cpu": "a CPU"}


def family(instance_type: str) -> str:
    """The family of `ml.<family>.<size>` ("" for anything else)."""
    parts = instance_type.split(".")
    return parts[1] if len(parts) == 3 and parts[0] == "ml" else ""


def processor(instance_type: str) -> str:
    """The image tables' processor for an instance type, by the SageMaker SDK's rule."""
    name = family(instance_type)
    if name.startswith("inf"):
        return "inf"
    if name.startswith("trn"):
        return "trn"
    return "gpu" if name[:1] in ("g", "p") else "cpu"


def kind_of(instance_type: str) -> str:
    """What an instance type is, for messages: "a GPU", "an AWS Inferentia (Neuron)", "a CPU", ..."""
    return ACCELERATOR_NAMES.get(processor(instance_type), "a GPU")


def gpu_of(instance_type: str) -> Gpu | None:
    """The GPU of an instance type's family; None when the family is not a GPU one this table knows."""
    return GPU_FAMILIES.get(family(instance_type))
