"""A training job on this machine under the training-container contract, its source's requirements,
and what local mode substitutes for what cannot exist here."""
