"""The evaluation gate: a challenger worse than its champion does not get traffic (docs/evaluation.md, "The gate").

The pipeline's evaluation step scores a new version (the challenger) and the version that served on the run's
target when the job ran (the champion) on the same held-out examples, in a SageMaker processing job whose
``evaluation.json`` follows one schema (``SCHEMA``, written by training_code/evaluate.py). The step wraps it in
who the versions are (``Evaluated``: the champion read from the target, the job's instance, seconds and USD)
and stores the wrapper with the version, under ``STATISTICS_KEY`` of its statistics document (which
UpdateModelPackage never touches), with the headline figures in its CustomerMetadataProperties (``headline``).

Where traffic moves (``hfpipe models approve``, ``promote``, ``deploy``, ``deploy --adapter``, and the Promote
and adapter state machines' Lambdas), one rule decides (``decide``) on the evaluation and the champion as read
just before the act:

- verdict ``worse`` (the difference's upper bound below ``-margin``): refused, with the figures;
- the champion that serves now is not the one evaluated against (another version was deployed since the job):
  the verdict is stale, refused; run the pipeline again to evaluate against what serves now (a version scored
  alone, its run naming no champion, is not compared with anything: it passes saying so where the gate is
  advisory, and is refused where it is mandatory while something serves on the target);
- no evaluation: refused where the environment's cdk.json ``evaluation_gate`` is ``mandatory``, passed with a
  note where it is ``advisory``;
- ``--override-evaluation REASON`` passes any of these, and the reason goes into the version's approval
  description (``override_note``).

The gate reads the verdict and the figures; it never recomputes them. Stdlib only: the Lambdas run it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from hfpipe.core import api_shapes
from hfpipe.core.promotion import registry
from hfpipe.core.recipe import evaluation
from hfpipe.core.validate import RecipeError

#: The document's schema (the contract between the evaluation job and the gate).
SCHEMA = evaluation.SCHEMA
#: cdk.json ``evaluation_gate``: what the gate does with a version that has no evaluation.
GATE_MODES = ("mandatory", "advisory")
DEFAULT_GATE_MODE = "advisory"
#: Where the wrapper sits in a version's statistics document (hfpipe.core.promotion.registry.statistics).
STATISTICS_KEY = "evaluation"
#: The option that overrides the gate, and the start of the approval description it records.
OVERRIDE_OPTION = "--override-evaluation"
OVERRIDE_PREFIX = "evaluation gate overridden: "
#: Where an override's reason is recorded: the version's approval description (approve, deploy, adapter deploy);
#: promote records it on the version it makes (``PROMOTE_RECORDED_IN``).
RECORDED_IN = "the version's approval description"
PROMOTE_RECORDED_IN = "the promoted version's evaluation_override metadata (CustomerMetadataProperties)"


class EvaluationFormatError(ValueError):
    """A document or wrapper that is not the contract's; the message names the field."""


def _object(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise EvaluationFormatError(f"{where}: {type(doc).__name__} is not accepted; accepted: an object")
    return doc


def check_document(doc: Any) -> dict[str, Any]:
    """``doc`` when it is the contract's document (its schema and consistency rules:
    hfpipe.core.recipe.evaluation.check_document, the one definition evaluate.py's output is held to);
    EvaluationFormatError naming the first field that is not."""
    try:
        return evaluation.check_document(doc)
    except RecipeError as err:
        raise EvaluationFormatError(str(err)) from None


@dataclass(frozen=True)
class Champion:
    """A version that serves on a target: its ARN and its model data (an adapter is read by its artifact)."""

    version_arn: str | None = None
    model_data: str | None = None
    #: A version promoted into this environment names its source (promotion.PROMOTED_FROM): the same model.
    source_arn: str | None = None

    def same_as(self, other: Champion | None) -> bool:
        if other is None:
            return False
        mine = {self.version_arn, self.model_data, self.source_arn} - {None}
        theirs = {other.version_arn, other.model_data, other.source_arn} - {None}
        return bool(mine & theirs)

    def to_json(self) -> dict[str, Any]:
        return {"version_arn": self.version_arn, "model_data": self.model_data, "source_arn": self.source_arn}

    @classmethod
    def from_json(cls, value: Any) -> Champion | None:
        if value is None:
            return None
        value = _object(value, "evaluation champion")
        return cls(
            **{
                k: (str(value[k]) if value.get(k) else None)
                for k in ("version_arn", "model_data", "source_arn")
            }
        )


@dataclass(frozen=True)
class Evaluated:
    """The document and who was evaluated, as the pipeline's step stores it with the version."""

    document: dict[str, Any]
    document_uri: str
    #: Where the champion was read: {"endpoint": NAME} or {"adapter": NAME}; {} when the run named none.
    target: dict[str, str] = field(default_factory=dict)
    champion: Champion | None = None
    #: The processing job: name, instance_type, instance_count, seconds, usd.
    job: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "document_uri": self.document_uri,
            "target": dict(self.target),
            "champion": self.champion.to_json() if self.champion else None,
            "job": dict(self.job),
            "document": self.document,
        }

    @classmethod
    def from_json(cls, value: Any) -> Evaluated:
        value = _object(value, STATISTICS_KEY)
        return cls(
            document=check_document(value.get("document")),
            document_uri=str(value.get("document_uri") or ""),
            target={str(k): str(v) for k, v in _object(value.get("target") or {}, "target").items()},
            champion=Champion.from_json(value.get("champion")),
            job=dict(_object(value.get("job") or {}, "job")),
        )

    @property
    def verdict(self) -> str:
        return str(self.document["verdict"])


def of_statistics(statistics: dict[str, Any]) -> Evaluated | None:
    """The wrapper a version's statistics document holds; None when the version was not evaluated, or its
    evaluation job failed (``failure_of``: the gate treats it as no evaluation)."""
    value = statistics.get(STATISTICS_KEY)
    return None if value is None or failure_of(statistics) is not None else Evaluated.from_json(value)


def _figure(value: Any, signed: bool = False, digits: int = 4) -> str:
    """A figure of the document; the schema allows null where a score could not be computed."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "n/a"
    return f"{value:+.{digits}g}" if signed else f"{value:.{digits}g}"


def _digits(high: Any, margin: float) -> int:
    """Significant digits enough that the interval's high end and -margin read apart where they differ (a
    ``worse`` high of -0.10004 against margin 0.1 must not print as -0.1), 4 at least."""
    if not isinstance(high, int | float) or isinstance(high, bool) or high == -margin:
        return 4
    return next((p for p in range(4, 18) if f"{high:.{p}g}" != f"{-margin:.{p}g}"), 17)


def _interval(entry: dict[str, Any], margin: float = 0.0) -> str:
    p = _digits(entry.get("high"), margin)
    value, low, high = (entry.get(k) for k in ("value", "low", "high"))
    return f"{_figure(value, True, p)} ({_figure(low, True, p)} to {_figure(high, True, p)})"


def _score(doc: dict[str, Any], side: str, metric: str) -> str:
    return score_text((((doc.get(side) or {}).get("scores") or {}).get(metric)) or {})


def score_text(entry: dict[str, Any]) -> str:
    """One side's score of the document: 'value [low, high] on n' ('-' for none)."""
    if not entry:
        return "-"
    return (
        f"{_figure(entry.get('value'))} [{_figure(entry.get('low'))}, {_figure(entry.get('high'))}] "
        f"on {entry.get('n')}"
    )


def difference_text(entry: dict[str, Any], margin: float = 0.0) -> str:
    """The document's difference challenger - champion: 'value (low to high)', signed."""
    return _interval(entry, margin)


def figures(doc: dict[str, Any]) -> str:
    """One line of the verdict's figures: the difference and its interval, and both sides' scores."""
    rule = doc["rule"]
    metric, confidence = rule["metric"], float(rule["confidence"])
    challenger = f"challenger {metric} {_score(doc, 'challenger', metric)}"
    if doc.get("difference") is None:
        return f"{challenger} (no champion to compare with)"
    margin = float(rule["margin"])
    digits = _digits(doc["difference"].get("high"), margin)
    return (
        f"{metric} difference {_interval(doc['difference'], margin)} at {confidence:.0%} confidence, margin "
        f"{margin:.{digits}g}; {challenger}, champion {_score(doc, 'champion', metric)}"
    )


def summary(stored: Any, env: str | None = None) -> dict[str, str] | None:
    """What `hfpipe models compare` shows of a stored evaluation (its wrapper, as the statistics document holds
    it): the verdict, the rule's metric with its interval, the difference against its champion, the champion
    (the version's RECIPE/N in ``env``, as the commands name versions, else its ARN); None when there is none
    or it is not the contract's."""
    if failure_of({STATISTICS_KEY: stored}) is not None:
        return {
            "verdict": "failed",
            "metric": "-",
            "score": str(stored["failure"].get("cause") or "-"),
            "difference": "-",
            "champion": _champion_ref(Champion.from_json(stored.get("champion")), env)
            if stored.get("champion")
            else _not_scored_against(stored.get("target")),
        }
    try:
        evaluated = Evaluated.from_json(stored) if stored is not None else None
    except EvaluationFormatError:
        return None
    if evaluated is None:
        return None
    doc = evaluated.document
    metric = str(doc["rule"]["metric"])
    return {
        "verdict": evaluated.verdict,
        "metric": metric,
        "score": f"{metric} {_score(doc, 'challenger', metric)}",
        "difference": _interval(doc["difference"], float(doc["rule"]["margin"]))
        if doc.get("difference")
        else "-",
        "champion": _champion_ref(evaluated.champion, env),
    }


def _not_scored_against(target: Any) -> str:
    """A failed evaluation's champion column where no champion was scored: what its run named, if anything."""
    named = " ".join(f"{k} {v}" for k, v in target.items()) if isinstance(target, dict) and target else ""
    return f"none scored (its run named {named})" if named else "none (its run named no --champion)"


#: What a CustomerMetadataProperties value may hold (botocore's sagemaker model, CustomerMetadataValue:
#: ``^([\p{L}\p{Z}\p{N}_.:\/=+\-@]*)${1,256}``); anything else becomes a space.
_METADATA_CHARACTER = re.compile(r"[\w\s.:/=+\-@]")
METADATA_VALUE_MAX = 256


def metadata_value(text: str) -> str:
    """``text`` as a CustomerMetadataProperties value: the characters the API accepts, at most 256."""
    kept = "".join(c if _METADATA_CHARACTER.fullmatch(c) else " " for c in text)
    return " ".join(kept.split())[:METADATA_VALUE_MAX] or "-"


def _plain(entry: dict[str, Any]) -> str:
    """A score or difference in the characters a metadata value may hold: 'value V low L high H [n N]'."""
    text = f"value {_figure(entry.get('value'))} low {_figure(entry.get('low'))} high {_figure(entry.get('high'))}"
    return text + (f" n {entry['n']}" if entry.get("n") is not None else "")


def headline(evaluated: Evaluated) -> dict[str, str]:
    """CustomerMetadataProperties of an evaluated version: the verdict and the headline figures (strings in the
    characters the API accepts: ``metadata_value``)."""
    doc = evaluated.document
    metric = str(doc["rule"]["metric"])
    score = ((doc.get("challenger") or {}).get("scores") or {}).get(metric)
    values = {
        "evaluation_verdict": evaluated.verdict,
        "evaluation_metric": metric,
        "evaluation_score": _plain(score) if score else None,
        "evaluation_difference": _plain(doc["difference"]) if doc.get("difference") else None,
        "evaluation_champion": evaluated.champion.version_arn if evaluated.champion else None,
        "evaluation_document": evaluated.document_uri,
    }
    return {key: metadata_value(value) for key, value in values.items() if value}


@dataclass(frozen=True)
class Decision:
    """What the gate decided: ``allowed``, one line saying why (``message``), and with an override the text
    the version's approval description records (``note``)."""

    allowed: bool
    message: str
    note: str | None = None
    #: With an override: the reason as typed (stripped), and the short refusal it passed (``refusal_summary``).
    reason: str | None = None
    refused: str | None = None


#: UpdateModelPackage's ApprovalDescription holds at most 1024 characters (botocore's model).
APPROVAL_DESCRIPTION_MAX = 1024


def check_mode(value: Any, where: str = "evaluation_gate") -> str:
    """``value`` when it is a gate mode; ValueError naming ``where`` and the modes otherwise."""
    if value not in GATE_MODES:
        raise ValueError(
            f"{where}: {value!r} is not accepted; accepted: " + " or ".join(f'"{m}"' for m in GATE_MODES)
        )
    return str(value)


def _champion_text(champion: Champion | None) -> str:
    if champion is None:
        return "no champion"
    return champion.version_arn or champion.model_data or "an unregistered model"


def _champion_ref(champion: Champion | None, env: str | None) -> str:
    """The champion as `models compare` names it: its version's RECIPE/N in ``env`` (registry.ref_of_arn)."""
    if champion is None or champion.version_arn is None or env is None:
        return _champion_text(champion)
    return registry.ref_of_arn(champion.version_arn, env)


def _why_alone(evaluated: Evaluated) -> str:
    """Why a version was scored alone: its run named no champion, or named one where nothing served then."""
    if not evaluated.target:
        return "its run named no --champion"
    ((kind, name),) = list(evaluated.target.items())[:1]
    return f"its run named --champion {kind} {name}, where nothing served then"


def _scored_alone(evaluated: Evaluated, version: str, champion_now: Champion, where: str) -> str:
    """Where the gate is mandatory, a version scored alone (its run named no champion) does not replace what
    serves: nothing compared it with what it would replace. At promote the champion is the source's as
    evaluated (none for a version scored alone), so this refuses at the target's deploy, where what serves is
    read."""
    kind = "adapter" if where.startswith("adapter ") else "endpoint"
    return (
        f"version {version} was scored alone (evaluation {evaluated.verdict}: {_why_alone(evaluated)}), and "
        f"{where} serves {_champion_text(champion_now)}; this environment's cdk.json evaluation_gate is "
        f"mandatory: evaluate it against what serves: hfpipe start ... --champion {kind}:NAME naming it"
    )


def problem(
    evaluated: Evaluated | None,
    *,
    version: str,
    champion_now: Champion | None,
    mode: str,
    where: str,
    failed: str | None = None,
) -> str | None:
    """Why the gate refuses ``version`` where traffic moves to ``where``; None when it passes. ``champion_now``
    is what serves there as read just before the act; ``failed``: the cause when its evaluation job failed."""
    if evaluated is None:
        if check_mode(mode) == "advisory":
            return None
        why = (
            f"its evaluation failed: {failed}"
            if failed
            else "its recipe names no `evaluation`, or it was registered before one was stored"
        )
        return f"version {version} has no evaluation ({why}), and this environment's cdk.json evaluation_gate is mandatory"
    if champion_now is not None and evaluated.champion is None and check_mode(mode) == "mandatory":
        return _scored_alone(evaluated, version, champion_now, where)
    if champion_now is None or evaluated.champion is None:
        # Nothing serves there (no champion to be worse than), or the version was scored alone where the gate
        # is advisory (its run named no champion: nothing says it is worse; ``passed`` says it was not compared).
        return None
    if not champion_now.same_as(evaluated.champion):
        return (
            f"the evaluation of version {version} is stale: it was scored against "
            f"{_champion_text(evaluated.champion)}, and {where} serves {_champion_text(champion_now)} now; "
            "run the pipeline again to evaluate against what serves now"
        )
    if evaluated.verdict == "worse":
        return (
            f"version {version} is worse than the champion {_champion_text(evaluated.champion)} on "
            f"{evaluated.document.get('data', {}).get('channel', 'the held-out data')}: "
            f"{figures(evaluated.document)}"
        )
    return None


def passed(
    evaluated: Evaluated | None,
    champion_now: Champion | None,
    where: str,
    failed: str | None = None,
    serves_itself: bool = False,
) -> str:
    """The line a passing gate says; ``serves_itself``: the version serves on ``where`` already (what serves
    there is the version itself, so ``champion_now`` is None: it replaces nothing)."""
    if evaluated is None and failed:
        return f"not evaluated: its evaluation failed ({failed}); evaluation_gate advisory: the gate lets it pass"
    if evaluated is None:
        return "not evaluated (evaluation_gate advisory): the gate lets it pass"
    if champion_now is None and not where:  # no target named, and the version's run named none either
        return (
            f"evaluation {evaluated.verdict}: scored alone, for no target (its run named no --champion): the gate "
            "lets it pass"
        )
    if champion_now is None and serves_itself:
        return (
            f"evaluation {evaluated.verdict}; it serves on {where} itself (it is its own champion: it replaces "
            "nothing): the gate lets it pass"
        )
    if champion_now is None:
        return f"evaluation {evaluated.verdict}; nothing serves on {where} now: the gate lets it pass"
    if evaluated.champion is None:
        # A run that named --champion where nothing served then did what it could: it is not told to name one.
        advice = _why_alone(evaluated) if evaluated.target else "start the run with --champion to compare"
        return (
            f"evaluation {evaluated.verdict}: scored alone, not against {_champion_text(champion_now)} that serves "
            f"on {where} ({advice}): the gate lets it pass"
        )
    # The champion as evaluated (its version ARN): the one serving now is the same model (``problem``).
    return (
        f"evaluation {evaluated.verdict} against {_champion_text(evaluated.champion)}: "
        f"{figures(evaluated.document)}"
    )


def scored_alone_promoted(evaluated: Evaluated, env: str, serving: list[str], mode: str) -> str:
    """What ``hfpipe promote`` says of a version scored alone (its run named no champion) promoted into ``env``:
    what serves there of its recipe (``serving``: "endpoint NAME serves RECIPE/N", read from the target), and
    what the target's deploy, which reads what serves, will do with it (``problem``: refused where ``mode`` is
    mandatory while something serves)."""
    alone = f"evaluation {evaluated.verdict}: scored alone (its run named no --champion)"
    if not serving:
        return f"{alone}; nothing of its recipe serves in environment {env} now: the gate lets it pass"
    if check_mode(mode) == "mandatory":
        then = (
            f"{env}'s deploy will refuse it there (its cdk.json evaluation_gate is mandatory): evaluate it against "
            f'what serves (hfpipe start ... --champion endpoint:NAME), or deploy with {OVERRIDE_OPTION} "REASON"'
        )
    else:
        then = f"{env}'s deploy lets it pass (evaluation_gate advisory), saying it was not compared"
    return f"{alone}, not against what serves in environment {env}: {'; '.join(serving)}; {then}"


def decide(
    evaluated: Evaluated | None,
    *,
    version: str,
    champion_now: Champion | None,
    mode: str,
    where: str,
    override: str | None = None,
    recorded: str = RECORDED_IN,
    failed: str | None = None,
    description: str | None = None,
    execution: str | None = None,
    serves_itself: bool = False,
) -> Decision:
    """The gate's one rule (module docstring), for every place traffic moves; ``recorded`` says where the
    place records an override's reason (``PROMOTE_RECORDED_IN``: the promoted version's metadata, whose
    limits ``check_override`` applies with ``metadata=True``); ``failed``: the cause when the version's
    evaluation job failed (it is then no evaluation, ``failure_of``); ``description``: what the version's
    approval description will hold before the override's note (``check_override``), where the place knows it;
    ``execution``: the execution that records the note (deploy, deploy --adapter: ``override_note``);
    ``serves_itself``: the version serves on ``where`` already (``passed``)."""
    found = problem(
        evaluated, version=version, champion_now=champion_now, mode=mode, where=where, failed=failed
    )
    if found is None:
        return Decision(True, passed(evaluated, champion_now, where, failed, serves_itself))
    if override is not None:
        short = refusal_summary(evaluated, version=version, champion_now=champion_now)
        reason = check_override(
            override,
            description=description,
            refused=short,
            execution=execution,
            metadata=recorded == PROMOTE_RECORDED_IN,
        )
        return Decision(
            True, f"{found}; overridden: {reason}", override_note(reason, short, execution), reason, short
        )
    return Decision(
        False,
        f'{found}; accepted: a version the gate passes, or {OVERRIDE_OPTION} "REASON" (recorded in {recorded})',
    )


class OverrideError(ValueError):
    """An override's reason that is not accepted (``check_override``): a usage error, refused before anything
    that writes."""


#: What an override's reason may be (``check_override``), said in each refusal.
OVERRIDE_ACCEPTED = (
    "accepted: why, in words, on one line (no line break), that fits UpdateModelPackage's ApprovalDescription "
    f"(botocore's sagemaker model: pattern .*, at most {APPROVAL_DESCRIPTION_MAX} characters) together with "
    "what the version's approval description holds and the gate's short \"(refused: ...)\" note"
)
#: At promote (``PROMOTE_RECORDED_IN``): CustomerMetadataValue, botocore's sagemaker model:
#: ``([\p{L}\p{Z}\p{N}_.:\/=+\-@]*)${1,256}``; the reason goes whole under ``evaluation_override``.
OVERRIDE_ACCEPTED_AT_PROMOTE = (
    f"accepted at promote: at most {METADATA_VALUE_MAX} characters of letters, digits, spaces and _ . : / = + - @ "
    "(CustomerMetadataValue, botocore's sagemaker model: the promoted version's evaluation_override metadata "
    "holds the reason whole)"
)
#: The characters Java's ``.`` does not match (the pattern ``.*`` of ApprovalDescription stops there):
#: java.util.regex.Pattern, "Line terminators".
_LINE_TERMINATORS = "\n\r\u0085\u2028\u2029"
_METADATA_PUNCTUATION = "_.:/=+-@"


def _short(ref: str | None) -> str:
    """A version named short: RECIPE/N as given, or a version ARN's group/N (``...:model-package/G/N``)."""
    text = ref or "-"
    return text.split(":model-package/", 1)[1] if ":model-package/" in text else text


def refusal_summary(evaluated: Evaluated | None, *, version: str, champion_now: Champion | None) -> str:
    """What an override's note records of the refusal it passed, short (refs, not ARNs; the verdict and the
    difference), so many overrides fit one approval description (``problem``'s cases, in its order)."""
    mine = _short(version)
    if evaluated is None:
        return f"{mine} has no evaluation"
    if evaluated.champion is None:
        return f"{mine} scored alone, {_short(_champion_text(champion_now))} serves"
    if champion_now is not None and not champion_now.same_as(evaluated.champion):
        return (
            f"{mine} evaluated against {_short(_champion_text(evaluated.champion))}, "
            f"{_short(_champion_text(champion_now))} serves"
        )
    doc = evaluated.document
    difference = doc.get("difference")
    by = f" {doc['rule']['metric']} {difference_text(difference)}" if difference else ""
    return f"{mine} {evaluated.verdict} vs {_short(_champion_text(evaluated.champion))}{by}"


def override_note(reason: str, refused: str, execution: str | None = None) -> str:
    """What an override records: the reason and the refusal it passed (``refusal_summary``); with
    ``execution``, the execution that used it and records it (``execution_mark``: a retried step finds it
    there and appends nothing)."""
    used_by = f"; {execution_mark(execution)}" if execution else ""
    return f"{OVERRIDE_PREFIX}{reason} (refused: {refused}{used_by})"


def execution_mark(execution: str) -> str:
    """How an override's note names the execution that recorded it (``recorded_by``)."""
    return f"{EXECUTION_MARK}{execution}]"


#: The start of ``execution_mark``. An execution's name holds no "]" and is unique per state machine for 90
#: days (StartExecution's ``name``: 1 to 80 characters, "must not contain ... brackets < > { } [ ]",
#: https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html), so the mark of one
#: execution is never part of another's.
EXECUTION_MARK = "[execution "


def recorded_by(description: str | None, execution: str) -> bool:
    """Whether an approval description holds an override note recorded by ``execution`` already."""
    return execution_mark(execution) in (description or "")


def appended(description: str | None, note: str) -> str:
    """The approval description with ``note`` after what it holds (the approve's reason, earlier overrides
    stay); never cut (``check_override`` refuses what would not fit, before anything is written)."""
    return f"{description}; {note}" if description else note


def _offending(reason: str, allowed: Any) -> str | None:
    """The first character of ``reason`` that ``allowed`` refuses, quoted with its code point and position."""
    for i, c in enumerate(reason, 1):
        if not allowed(c):
            return f"{c!r} (U+{ord(c):04X}) at character {i} of the reason"
    return None


def _metadata_character(c: str) -> bool:
    return (unicodedata.category(c)[0] in "LZN" and c not in _LINE_TERMINATORS) or c in _METADATA_PUNCTUATION


def check_override(
    override: str,
    *,
    description: str | None = None,
    refused: str = "",
    execution: str | None = None,
    metadata: bool = False,
) -> str:
    """An override's reason, stripped, under the one rule of every place that takes it (approve, deploy,
    deploy --adapter, promote, and the deploy's and adapter's state machines), checked before anything that
    writes: not blank, nothing cut or rewritten: on one line, and the approval description it is recorded in
    (``description``, what it holds before the note, then ``override_note`` with the gate's short refusal
    ``refused``) accepted by UpdateModelPackage's ApprovalDescription (botocore's sagemaker model: max 1024,
    pattern ``.*``, which stops at a line break; hfpipe.core.api_shapes). ``metadata`` (promote): the reason is
    the promoted version's evaluation_override metadata value, whole (``OVERRIDE_ACCEPTED_AT_PROMOTE``).
    OverrideError naming the option, the offending character and how much fits otherwise."""
    reason = override.strip()
    accepted = OVERRIDE_ACCEPTED_AT_PROMOTE if metadata else OVERRIDE_ACCEPTED
    if not reason:
        raise OverrideError(f"{OVERRIDE_OPTION}: an empty reason is not accepted; {accepted}")
    bad = _offending(reason, _metadata_character if metadata else (lambda c: c not in _LINE_TERMINATORS))
    if bad:
        raise OverrideError(f"{OVERRIDE_OPTION}: the reason is not accepted: {bad}; {accepted}")
    if metadata:
        fits, held = METADATA_VALUE_MAX, ""
    else:
        fits = APPROVAL_DESCRIPTION_MAX - len(appended(description, override_note("", refused, execution)))
        held = f"the version's approval description holds {len(description or '')} characters and the gate's note"
    if len(reason) > fits:
        raise OverrideError(
            f"{OVERRIDE_OPTION}: the reason is not accepted: {_room(reason, fits, held)}; {accepted}"
        )
    found = (
        []
        if metadata
        else api_shapes.shape_problems(
            "ApprovalDescription", appended(description, override_note(reason, refused, execution))
        )
    )
    if found:
        raise OverrideError(
            f"{OVERRIDE_OPTION}: the reason is not accepted: the approval description it would be recorded in "
            f"breaks {found[0]}; {accepted}"
        )
    return reason


def _room(reason: str, fits: int, held: str) -> str:
    """How much of a reason fits, and, where nothing does, how to free room."""
    if not held:
        return f"it is {len(reason)} characters; at most {fits} fit"
    if fits > 0:
        return f"it is {len(reason)} characters; {held} leave room for at most {fits}"
    return (
        f"{held} leave no room ({APPROVAL_DESCRIPTION_MAX} characters at most); UpdateModelPackage's "
        "ApprovalDescription is replaced whole, never appended by SageMaker: `hfpipe models approve REF --reason "
        "TEXT` (where the gate passes without an override) or `aws sagemaker update-model-package "
        "--model-package-arn ARN --approval-description TEXT` replaces it (the record goes with it: keep a copy)"
    )


#: What a failed evaluation job leaves under ``STATISTICS_KEY`` (docs/evaluation.md, "A failed evaluation"):
#: {"failure": {"error", "status", "cause"}, "document_uri", "target", "champion", "job"}, no document.
FAILURE_KEY = "failure"
#: The verdict a version whose evaluation job failed shows (its CustomerMetadataProperties, the report).
FAILED_VERDICT = "failed"


def failure_of(statistics: dict[str, Any]) -> str | None:
    """The cause of a version's failed evaluation job (its statistics document's ``STATISTICS_KEY``); None when
    the job did not fail (or the version was not evaluated)."""
    value = statistics.get(STATISTICS_KEY)
    failure = value.get(FAILURE_KEY) if isinstance(value, dict) else None
    if not isinstance(failure, dict):
        return None
    return str(failure.get("cause") or "no cause given")


def failure_headline(stored: dict[str, Any]) -> dict[str, str]:
    """CustomerMetadataProperties of a version whose evaluation job failed: the verdict ``failed`` and the cause
    (in the characters the API accepts: ``metadata_value``)."""
    cause = failure_of({STATISTICS_KEY: stored}) or "no cause given"
    return {"evaluation_verdict": FAILED_VERDICT, "evaluation_failure": metadata_value(cause)}
