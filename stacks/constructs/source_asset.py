"""The training code as ONE deterministic `sourcedir.tar.gz` S3 asset, built without Docker.

SageMaker's `sagemaker_submit_directory` hyperparameter points at a tar.gz that the training toolkit
downloads and extracts before running the entry point. CDK builds it at synth time by local bundling:
`TarballBundler` writes the archive with `hfpipe.core.recipe.sourcedir.pack` (sorted entries, fixed owner, mode and
mtime, a gzip header without name or time; the packing a recipe's own source gets too), so the same files
always give the same bytes; the asset hash is taken from those
bytes (`AssetHashType.OUTPUT`), so an edited file gives a new hash and a new S3 key, and nothing else does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, BundlingOutput, DockerImage, ILocalBundling
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from hfpipe.core.recipe.sourcedir import ARCHIVE_NAME, EXCLUDED_DIRS, EXCLUDED_SUFFIXES, pack

__all__ = ["ARCHIVE_NAME", "SourcedirAsset", "TarballBundler", "tarball_bytes", "write_tarball"]

# Never run: local bundling always succeeds, and CDK only needs an image name to accept the options.
_NO_DOCKER_IMAGE = "hfpipe/local-bundling-only"


def tarball_bytes(source: Path) -> bytes:
    """The deterministic gzip-compressed tar of `source` (hfpipe.core.recipe.sourcedir.pack, shared with a recipe's
    own source): same files and contents, same bytes."""
    return pack(source).data


def write_tarball(source: Path, destination: Path) -> Path:
    """Write `tarball_bytes(source)` to `destination` and return it."""
    destination.write_bytes(tarball_bytes(source))
    return destination


@jsii.implements(ILocalBundling)
class TarballBundler:
    """CDK local bundling that writes `sourcedir.tar.gz` into the bundling output folder, without Docker."""

    def __init__(self, source: Path) -> None:
        self._source = source

    # jsii passes the BundlingOptions struct positionally or as keywords depending on the caller.
    def try_bundle(self, output_dir: str, *args: Any, **kwargs: Any) -> bool:
        """Write the archive; always True, so CDK never falls back to Docker."""
        write_tarball(self._source, Path(output_dir) / ARCHIVE_NAME)
        return True


class SourcedirAsset(Construct):
    """The training code folder, shipped as one `sourcedir.tar.gz` in the CDK assets bucket.

    `s3_uri` is what a training job's `sagemaker_submit_directory` names; `grant_read` lets a role
    (the SageMaker execution role) read exactly that object and nothing else in the assets bucket.
    """

    def __init__(self, scope: Construct, construct_id: str, *, source: Path) -> None:
        super().__init__(scope, construct_id)
        self.source = source
        self.asset = s3_assets.Asset(
            self,
            "Asset",
            path=str(source),
            exclude=[f"**/{d}" for d in sorted(EXCLUDED_DIRS)] + [f"**/*{s}" for s in EXCLUDED_SUFFIXES],
            asset_hash_type=AssetHashType.OUTPUT,
            bundling=BundlingOptions(
                image=DockerImage.from_registry(_NO_DOCKER_IMAGE),
                local=TarballBundler(source),
                output_type=BundlingOutput.SINGLE_FILE,
            ),
        )
        self.s3_uri: str = self.asset.s3_object_url
        self.object_arn: str = self.asset.bucket.arn_for_objects(self.asset.s3_object_key)

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow `grantee` to download this archive (s3:GetObject on its one object)."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["s3:GetObject"], resource_arns=[self.object_arn]
        )
