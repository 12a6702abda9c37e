"""The evaluation gate's one rule (hfpipe.core.promotion.evaluation_gate), on documents written to the contract."""

from __future__ import annotations

import pytest
from evaluations import CHAMPION_ARN, document, wrapper

from hfpipe.core.promotion import evaluation_gate as gate
from hfpipe.core.promotion.evaluation_gate import Champion, Evaluated

CHAMPION = Champion(version_arn=CHAMPION_ARN)
OTHER = Champion(version_arn=CHAMPION_ARN.replace("/1", "/7"))


def _decide(evaluated, champion=CHAMPION, mode="advisory", override=None):
    return gate.decide(
        evaluated,
        version="tiny-qa/2",
        champion_now=champion,
        mode=mode,
        where="endpoint hfpipe-dev-qa",
        override=override,
    )


def test_a_worse_challenger_is_refused_with_its_figures():
    decision = _decide(Evaluated.from_json(wrapper("worse")))
    assert not decision.allowed
    assert "version tiny-qa/2 is worse than the champion " + CHAMPION_ARN in decision.message
    assert "f1 difference -3.1 (-5 to -1.2) at 95% confidence, margin 0" in decision.message
    assert "challenger f1 58.1 [52, 64] on 40, champion 61.2 [55, 67.1] on 40" in decision.message
    assert '--override-evaluation "REASON"' in decision.message


@pytest.mark.parametrize("verdict", ["better", "not_worse"])
def test_a_better_or_not_worse_challenger_passes(verdict):
    decision = _decide(Evaluated.from_json(wrapper(verdict)))  # figures that give the verdict
    assert decision.allowed and decision.note is None
    assert decision.message.startswith(f"evaluation {verdict} against {CHAMPION_ARN}")


def test_another_champion_now_makes_the_evaluation_stale():
    decision = _decide(Evaluated.from_json(wrapper("better", low=1.0, high=2.0, value=1.5)), champion=OTHER)
    assert not decision.allowed
    assert "is stale: it was scored against " + CHAMPION_ARN in decision.message
    assert f"serves {OTHER.version_arn} now" in decision.message
    # Scored alone (the run named no champion): nothing says it is worse; it passes, saying so.
    alone = _decide(Evaluated.from_json(wrapper("no_champion", champion=None)), champion=OTHER)
    assert alone.allowed and f"scored alone, not against {OTHER.version_arn} that serves" in alone.message


def test_a_promoted_champion_is_its_source():
    promoted = Champion(
        version_arn="arn:aws:sagemaker:us-east-1:1:model-package/hfpipe-prod-tiny-qa/1",
        source_arn=CHAMPION_ARN,
    )
    assert not _decide(Evaluated.from_json(wrapper("worse")), champion=promoted).allowed
    assert "stale" not in _decide(Evaluated.from_json(wrapper("worse")), champion=promoted).message


def test_nothing_serving_passes():
    decision = _decide(Evaluated.from_json(wrapper("worse")), champion=None)
    assert decision.allowed and "nothing serves on endpoint hfpipe-dev-qa now" in decision.message


def test_no_evaluation_is_refused_only_where_mandatory():
    assert _decide(None, mode="advisory").allowed
    refused = _decide(None, mode="mandatory")
    assert not refused.allowed
    assert "has no evaluation" in refused.message and "evaluation_gate is mandatory" in refused.message
    with pytest.raises(ValueError, match="evaluation_gate: 'strict' is not accepted"):
        _decide(None, mode="strict")


def test_an_override_passes_and_gives_the_approval_description():
    decision = _decide(Evaluated.from_json(wrapper("worse")), override="the champion's data drifted")
    assert decision.allowed
    assert decision.note.startswith("evaluation gate overridden: the champion's data drifted (refused: ")
    assert "-3.1" in decision.note and len(decision.note) <= 1024
    with pytest.raises(ValueError, match="--override-evaluation: an empty reason"):
        _decide(Evaluated.from_json(wrapper("worse")), override="  ")


@pytest.mark.parametrize(
    "change, field",
    [
        ({"schema": "hfpipe.evaluation/2"}, "evaluation.schema"),
        ({"verdict": "maybe"}, "evaluation.verdict"),
        ({"difference": None}, "evaluation.difference"),
        ({"rule": {**document()["rule"], "margin": "0"}}, "evaluation.rule.margin"),
    ],
)
def test_a_document_off_the_contract_is_refused_naming_the_field(change, field):
    with pytest.raises(gate.EvaluationFormatError, match=f"^{field}"):
        gate.check_document({**document("worse"), **change})


def test_headline_properties_are_strings():
    props = gate.headline(Evaluated.from_json(wrapper("worse")))
    assert props == {
        "evaluation_verdict": "worse",
        "evaluation_metric": "f1",
        "evaluation_score": "value 58.1 low 52 high 64 n 40",
        "evaluation_difference": "value -3.1 low -5 high -1.2",
        "evaluation_champion": CHAMPION_ARN,
        "evaluation_document": "s3://artifacts/evaluations/run-2/evaluation.json",
    }


@pytest.mark.parametrize(
    "verdict, change, accepted",
    [
        ("better", {"low": -5.0, "high": -1.2, "value": -3.1}, "'worse'"),  # the whole interval below 0
        ("worse", {"low": -0.5, "high": 2.0, "value": 0.4}, "'not_worse'"),
        ("not_worse", {"low": 0.5, "high": 3.0, "value": 1.0}, "'better'"),
    ],
)
def test_a_verdict_its_own_figures_contradict_is_unreadable_and_refused(verdict, change, accepted):
    doc = document(verdict)
    doc["difference"].update(change)
    with pytest.raises(
        gate.EvaluationFormatError, match=f"^evaluation.verdict: '{verdict}' contradicts .*{accepted}"
    ):
        gate.check_document(doc)
    stored = {**wrapper(verdict), "document": doc}
    with pytest.raises(
        gate.EvaluationFormatError
    ):  # the gate reads it through the same check: never decided on
        _decide(Evaluated.from_json(stored))


def test_a_version_scored_alone_is_refused_where_mandatory_while_something_serves():
    alone = Evaluated.from_json(wrapper("no_champion", champion=None, target={}))
    assert _decide(alone, mode="advisory").allowed  # advisory: passes, saying it was not compared
    assert _decide(alone, champion=None, mode="mandatory").allowed  # nothing serves: nothing to compare with
    refused = _decide(alone, mode="mandatory")
    assert not refused.allowed
    assert refused.message.startswith(
        "version tiny-qa/2 was scored alone (evaluation no_champion: its run named no --champion), and endpoint "
        f"hfpipe-dev-qa serves {CHAMPION_ARN}; this environment's cdk.json evaluation_gate is mandatory: evaluate "
        "it against what serves: hfpipe start ... --champion endpoint:NAME naming it; accepted: "
    )
    assert _decide(alone, mode="mandatory", override="first model of a new task").allowed
    # Newcomer finding 2: a run that named a champion where nothing served was not one that named none.
    named = _decide(Evaluated.from_json(wrapper("no_champion", champion=None)), mode="mandatory")
    assert (
        "(evaluation no_champion: its run named --champion endpoint hfpipe-dev-qa, where nothing served "
        in (named.message)
    ), named.message
    on_adapter = gate.decide(
        alone, version="tiny-adapter/2", champion_now=CHAMPION, mode="mandatory", where="adapter support"
    )
    assert not on_adapter.allowed and "--champion adapter:NAME naming it" in on_adapter.message
    # At promote the champion is the source's as evaluated: none for a version scored alone, so it passes
    # there and is refused at the target's deploy, where what serves is read.
    from hfpipe.core.promotion import promotion

    promoted = promotion.evaluation_decision(
        {"evaluation": wrapper("no_champion", champion=None)},
        "tiny-qa/2",
        source_env="dev",
        env="prod",
        mode="mandatory",
        override=None,
    )
    assert promoted.allowed


def test_a_promote_refusal_says_where_promote_records_the_override():
    from hfpipe.core.promotion import promotion

    with pytest.raises(promotion.PromotionRefused) as refused:
        promotion.evaluation_decision(
            {"evaluation": wrapper("worse")},
            "tiny-qa/2",
            source_env="dev",
            env="prod",
            mode="mandatory",
            override=None,
        )
    assert str(refused.value).endswith(
        "(recorded in the promoted version's evaluation_override metadata (CustomerMetadataProperties))"
    )
    assert _decide(Evaluated.from_json(wrapper("worse"))).message.endswith(
        "(recorded in the version's approval description)"
    )


def test_figures_near_the_margin_print_enough_digits_to_read_worse():
    doc = document("worse", low=-0.3, high=-0.10004, value=-0.2)
    doc["rule"]["margin"] = 0.1
    refused = _decide(Evaluated.from_json({**wrapper("worse"), "document": doc}))
    assert not refused.allowed
    assert "f1 difference -0.2 (-0.3 to -0.10004) at 95% confidence, margin 0.1;" in refused.message
    assert gate.summary({**wrapper("worse"), "document": doc})["difference"] == "-0.2 (-0.3 to -0.10004)"


def test_a_failed_evaluation_is_no_evaluation_and_the_gate_says_why():
    """A version whose evaluation job failed stores its failure (docs/evaluation.md, "A failed evaluation"):
    the gate reads it as no evaluation (refused where mandatory, passed where advisory), naming the cause."""
    cause = "Failed: AlgorithmError: no validation data (exit message: CUDA out of memory)"
    stored = {
        **wrapper("worse"),
        "failure": {"error": "States.TaskFailed", "status": "Failed", "cause": cause},
    }
    del stored["document"]
    statistics = {gate.STATISTICS_KEY: stored}
    assert gate.of_statistics(statistics) is None and gate.failure_of(statistics) == cause
    assert gate.failure_of({gate.STATISTICS_KEY: wrapper("worse")}) is None and gate.failure_of({}) is None
    failed = gate.failure_of(statistics)
    for mode in ("advisory", "mandatory"):
        decision = gate.decide(
            None, version="tiny-qa/2", champion_now=CHAMPION, mode=mode, where="endpoint e", failed=failed
        )
        assert decision.allowed == (mode == "advisory")
        assert f"its evaluation failed: {cause}" in decision.message or (
            f"its evaluation failed ({cause})" in decision.message
        )
    assert gate.summary(stored)["verdict"] == "failed" and gate.summary(stored)["score"] == cause
    assert gate.failure_headline(stored) == {
        "evaluation_verdict": "failed",
        "evaluation_failure": "Failed: AlgorithmError: no validation data exit message: CUDA out of memory",
    }


def test_a_version_scored_alone_at_promote_says_what_serves_and_what_the_targets_deploy_will_do():
    alone = Evaluated.from_json(wrapper("no_champion", champion=None, target={}))
    serving = ["endpoint hfpipe-prod-classifier serves tiny-mnli/3"]
    mandatory = gate.scored_alone_promoted(alone, "prod", serving, "mandatory")
    assert mandatory == (
        "evaluation no_champion: scored alone (its run named no --champion), not against what serves in "
        "environment prod: endpoint hfpipe-prod-classifier serves tiny-mnli/3; prod's deploy will refuse it there "
        "(its cdk.json evaluation_gate is mandatory): evaluate it against what serves (hfpipe start ... --champion "
        'endpoint:NAME), or deploy with --override-evaluation "REASON"'
    )
    assert gate.scored_alone_promoted(alone, "prod", serving, "advisory").endswith(
        "prod's deploy lets it pass (evaluation_gate advisory), saying it was not compared"
    )
    assert "nothing of its recipe serves in environment prod now" in gate.scored_alone_promoted(
        alone, "prod", [], "mandatory"
    )


def test_an_override_reason_is_one_rule_checked_with_what_the_description_holds():
    assert gate.check_override("  fixed labels ") == "fixed labels"
    for reason, problem in (("", "an empty reason"), ("a\nb", "pattern .*"), ("x" * 1000, "at most 1024")):
        with pytest.raises(gate.OverrideError, match=r"^--override-evaluation: .*accepted: why, in words"):
            gate.check_override(reason, description="approved by QA", refused="worse")
        with pytest.raises(gate.OverrideError, match=problem):
            gate.check_override(reason, description="approved by QA", refused="worse")
    fits = "r" * (1024 - len(gate.override_note("", "worse")) - len("held; "))
    assert gate.check_override(fits, description="held", refused="worse") == fits
    with pytest.raises(gate.OverrideError):
        gate.check_override(fits + "r", description="held", refused="worse")


def test_an_override_note_is_short_with_refs_not_arns():
    """Newcomer finding 5 (h-nc-eval2): each note repeated the whole refusal with full ARNs (380-470
    characters), so two filled the 1024 characters of the approval description."""
    decision = _decide(Evaluated.from_json(wrapper("worse")), override="r")
    assert decision.note is not None and "arn:" not in decision.note, decision.note
    assert decision.note.endswith("worse vs hfpipe-dev-tiny-qa/1 f1 -3.1 (-5 to -1.2))"), decision.note
    assert len(decision.note) < 120, len(decision.note)


def test_a_promote_override_is_kept_whole_or_refused_saying_what_fits():
    """Newcomer finding 4 (h-nc-eval2): promote stored the reason cut at 256 characters and its punctuation
    replaced by spaces (metadata_value). Now the reason goes whole into CustomerMetadataProperties, checked
    against CustomerMetadataValue first: refused, before anything, quoting the character or saying what fits."""
    from hfpipe.core.promotion.evaluation_gate import OverrideError, check_override

    assert check_override("relabelled data: see ticket 42", metadata=True) == "relabelled data: see ticket 42"
    with pytest.raises(OverrideError, match=r"it is 483 characters; at most 256 fit; accepted at promote"):
        check_override("because " * 60 + "END", metadata=True)
    with pytest.raises(OverrideError, match=r"'\(' \(U\+0028\) at character 5 of the reason"):
        check_override("A/B (ticket #42), ok! 100%", metadata=True)
    assert check_override("A/B (ticket #42), ok! 100%") == "A/B (ticket #42), ok! 100%"  # approve, deploy


def test_the_pass_line_says_what_happened_to_a_named_champion_and_to_a_version_serving_itself():
    """Newcomer finding 7 (h-nc-eval2): a run that named --champion where nothing served then was told to
    'start the run with --champion'; approve of a version serving on its target said 'nothing serves'."""
    from hfpipe.core.promotion.evaluation_gate import Champion, passed

    alone = Evaluated(
        document={"verdict": "no_champion"},
        document_uri="s3://b/evaluations/gone8/evaluation.json",
        target={"endpoint": "hfpipe-dev-classifier"},
    )
    line = passed(alone, Champion(version_arn="arn:x/4"), "endpoint hfpipe-dev-classifier")
    assert "where nothing served then" in line and "start the run with --champion" not in line, line
    line = passed(alone, None, "endpoint hfpipe-dev-classifier", serves_itself=True)
    assert "it serves on endpoint hfpipe-dev-classifier itself (it is its own champion" in line, line
    assert "nothing serves" not in line, line
