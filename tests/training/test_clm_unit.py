"""Pieces of the LoRA script and its handler that need no training run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

REPO_ROOT = Path(__file__).resolve().parents[2]

sys.path.insert(0, str(REPO_ROOT / "training_code"))
import inference_clm  # noqa: E402
import run_clm  # noqa: E402

PAD = 999_999


def _real_tokens(packed: dict[str, list[list[int]]]) -> list[int]:
    return [
        t
        for ids, mask in zip(packed["input_ids"], packed["attention_mask"], strict=True)
        for t, m in zip(ids, mask, strict=True)
        if m
    ]


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(min_value=0, max_value=40), max_size=60),
    block_size=st.integers(min_value=2, max_value=32),
    batch_a=st.integers(min_value=1, max_value=20),
    batch_b=st.integers(min_value=1, max_value=20),
)
def test_packing_keeps_every_token_exactly_once_whatever_the_batching(lengths, block_size, batch_a, batch_b):
    # Distinct token values, so a duplicated or dropped token cannot hide behind an equal neighbour.
    sequences, next_id = [], 0
    for n in lengths:
        sequences.append(list(range(next_id, next_id + n)))
        next_id += n
    packed = run_clm.pack_dataset(sequences, block_size, PAD, batch_size=batch_a)
    flat = [t for seq in sequences for t in seq]
    assert _real_tokens(packed) == flat
    assert all(len(ids) == block_size for ids in packed["input_ids"])
    partial = [mask for mask in packed["attention_mask"] if 0 in mask]
    assert len(partial) == (1 if len(flat) % block_size else 0)
    for ids, mask, labels in zip(
        packed["input_ids"], packed["attention_mask"], packed["labels"], strict=True
    ):
        assert labels == [t if m else run_clm.LABEL_PAD for t, m in zip(ids, mask, strict=True)]
    assert run_clm.pack_dataset(sequences, block_size, PAD, batch_size=batch_b) == packed


def test_block_packer_carries_the_remainder_between_batches():
    packer = run_clm.BlockPacker(4)
    assert packer.add([[1, 2, 3]]) == []
    assert packer.add([[4, 5], [6]]) == [[1, 2, 3, 4]]
    assert packer.add([[7, 8, 9]]) == [[5, 6, 7, 8]]
    assert packer.flush() == [[9]]
    assert packer.flush() == []


def test_template_renders_named_fields_and_names_a_missing_one():
    record = {"dialogue": "A: hi\nB: yo", "summary": "They greet."}
    text = inference_clm.render(inference_clm.DEFAULT_PROMPT_TEMPLATE, record, "</s>")
    assert text == "Summarize the chat dialogue:\nA: hi\nB: yo\n---\nSummary:\nThey greet.</s>"
    assert inference_clm.prompt_prefix(inference_clm.DEFAULT_PROMPT_TEMPLATE).endswith("Summary:\n")
    with pytest.raises(KeyError, match=r"'dialogue'.*available fields: \['text'\]"):
        inference_clm.render(inference_clm.DEFAULT_PROMPT_TEMPLATE, {"text": "x"})
    with pytest.raises(ValueError, match=r"no \{answer\} field"):
        inference_clm.prompt_prefix("Q: {question}", "answer")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"quantization": "int4"}, "quantization='int4' is not supported; use one of"),
        ({"lora_target_modules": " , "}, "lora_target_modules"),
        ({"lora_dropout": 1.5}, "lora_dropout=1.5"),
        ({"merge_dtype": "int8"}, "merge_dtype='int8'"),
    ],
)
def test_model_arguments_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_clm.ModelArguments(**kwargs)


def test_data_arguments_are_validated():
    with pytest.raises(ValueError, match="block_size=1"):
        run_clm.DataTrainingArguments(block_size=1)
    with pytest.raises(ValueError, match=r"no \{summary\} field"):
        run_clm.DataTrainingArguments(prompt_template="{dialogue}")


def test_arguments_parse_from_the_command_line_and_from_one_json_file(
    tmp_path, monkeypatch, in_process_training
):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path / "opt_ml"))
    argv = ["--lora_target_modules", "q_proj,v_proj", "--quantization", "nf4", "--merge_adapter", "false"]
    model_args, data_args, training_args = run_clm.parse_args(argv)
    assert model_args.target_modules == ["q_proj", "v_proj"]
    assert model_args.quantization == "nf4"
    assert model_args.merge_adapter is False
    assert data_args.block_size == 2048
    assert training_args.output_dir == str(tmp_path / "opt_ml" / "checkpoints")
    # On a CPU host data parallelism only engages with use_cpu (see parse_args).
    assert training_args.use_cpu is not torch.cuda.is_available()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"lora_r": 16, "optim": "adafactor", "gradient_checkpointing": True}))
    model_args, _, training_args = run_clm.parse_args([str(config)])
    assert (model_args.lora_r, training_args.optim, training_args.gradient_checkpointing) == (
        16,
        "adafactor",
        True,
    )
    assert training_args.output_dir == str(tmp_path / "opt_ml" / "checkpoints")


def test_resume_skips_a_half_written_checkpoint(tmp_path):
    for step, complete in ((5, True), (10, True), (15, False)):
        ckpt = tmp_path / f"checkpoint-{step}"
        ckpt.mkdir()
        if complete:
            (ckpt / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-x").mkdir()
    assert run_clm.last_complete_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-10")
    assert run_clm.last_complete_checkpoint(str(tmp_path / "missing")) is None
    # Cut off while the Trainer wrote its state in place: the file is there, empty or truncated.
    for step, text in ((20, ""), (25, '{"global_step": 25, "log_hist')):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(text)
    assert run_clm.last_complete_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-10")


def test_channel_data_loads_in_every_supported_format(tmp_path):
    from hfpipe.fixtures import samsum

    loaded = {}
    for fmt in samsum.FORMATS:
        channels = samsum.write_samsum(tmp_path / fmt, n_train=5, n_validation=2, fmt=fmt)
        loaded[fmt] = run_clm.load_split(str(channels["training"])).to_list()
    assert loaded["jsonl"] == loaded["json"] == loaded["parquet"] == loaded["disk"]
    assert [r["id"] for r in loaded["jsonl"]] == [f"fx{i:05d}" for i in range(5)]
    with pytest.raises(ValueError, match="no data in"):
        run_clm.load_split(str(tmp_path / "jsonl" / "validation" / "missing"))


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"max_length": 5}, "parameters.max_length is not supported; accepted:"),
        ({"do_sample": "yes"}, "parameters.do_sample='yes' must be true or false"),
        ({"max_new_tokens": 10_000}, "parameters.max_new_tokens=10000 must be between 1 and"),
        ("fast", "parameters must be a JSON object"),
    ],
)
def test_handler_refuses_bad_generation_parameters(parameters, message):
    with pytest.raises(ValueError, match=message):
        inference_clm.generation_kwargs(parameters)


def test_handler_passes_the_notebooks_sampling_parameters():
    kwargs = inference_clm.generation_kwargs(
        {"do_sample": True, "top_p": 0.9, "temperature": 0.9, "max_new_tokens": 50}
    )
    assert kwargs == {"do_sample": True, "top_p": 0.9, "temperature": 0.9, "max_new_tokens": 50}


@pytest.fixture(scope="module")
def bloom_tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from hfpipe.fixtures.samsum import build_tiny_bloom

    return AutoTokenizer.from_pretrained(build_tiny_bloom(tmp_path_factory.mktemp("bloom")))


def _recipe_template() -> str:
    from hfpipe.core.recipe.recipes import resolve_recipe

    return resolve_recipe(recipe_name="bloomz-7b1-lora-samsum")["training"]["hyperparameters"][
        "prompt_template"
    ]


@pytest.mark.parametrize("template", ["recipe", "default", "eos twice"])
def test_every_packed_record_ends_with_exactly_one_eos(template, bloom_tokenizer, in_process_training):
    import datasets
    from transformers import TrainingArguments

    templates = {
        "recipe": _recipe_template(),  # the seed's template, without {eos_token}
        "default": inference_clm.DEFAULT_PROMPT_TEMPLATE,
        "eos twice": inference_clm.DEFAULT_PROMPT_TEMPLATE + "{eos_token}",
    }
    raw = datasets.Dataset.from_list(
        [
            {"dialogue": "Amanda: Hi.\nJerry: Hello!", "summary": "They greet."},
            {"dialogue": "A: x", "summary": "y"},
        ]
    )
    data_args = run_clm.DataTrainingArguments(prompt_template=templates[template])
    tokenized = run_clm.tokenize(raw, bloom_tokenizer, data_args, TrainingArguments(output_dir="/tmp/unused"))
    eos = bloom_tokenizer.eos_token_id
    for ids in tokenized["input_ids"]:
        assert ids[-1] == eos and ids.count(eos) == 1, bloom_tokenizer.decode(ids)
    packed = run_clm.pack_dataset(tokenized["input_ids"], block_size=8, pad_token_id=PAD)
    assert _real_tokens(packed).count(eos) == len(raw)  # one record boundary per record


def test_the_endpoint_applies_the_training_template_to_a_dialogue():
    template = _recipe_template()
    dialogue = "Amanda: I baked cookies.\nJerry: Sure!"
    prompt = inference_clm.as_prompt(dialogue, template, "summary", "</s>")
    assert prompt == "Summarize the chat dialogue:\nAmanda: I baked cookies.\nJerry: Sure!\n---\nSummary:\n"
    assert inference_clm.as_prompt({"dialogue": dialogue}, template, "summary", "</s>") == prompt
    # A ready prompt (starting with the template's opening) is sent as is.
    assert inference_clm.as_prompt(prompt, template, "summary", "</s>") == prompt
    # The recipe's sample request is a dialogue: the handler turns it into the training prompt.
    from hfpipe.core.recipe.recipes import resolve_recipe

    # (tiny-lora: the same template, served by this handler; bloomz-7b1-lora-samsum serves on vLLM.)
    sample = resolve_recipe(recipe_name="tiny-lora")["serving"]["sample_request"]
    text, kwargs = inference_clm.parse_request(sample)
    assert inference_clm.as_prompt(text, template, "summary", "</s>").startswith(
        "Summarize the chat dialogue:\n"
    )
    assert kwargs["max_new_tokens"] <= inference_clm.MAX_NEW_TOKENS_LIMIT


@pytest.mark.parametrize(
    "template",
    ["recipe", "default", 'Quote "{dialogue}" \\n {{braces}} caf\u00e9 {eos_token}->{summary}{eos_token}'],
)
def test_the_saved_chat_template_renders_the_training_prompt(template, bloom_tokenizer):
    """vLLM's chat endpoint applies the tokenizer's chat template: the last user message must come out as
    the prompt training used for that dialogue (quotes, backslashes, braces and non-ASCII text included)."""
    template = {"recipe": _recipe_template(), "default": inference_clm.DEFAULT_PROMPT_TEMPLATE}.get(
        template, template
    )
    dialogue = 'Amanda: "Cookies?" \\ {x} caf\u00e9\nJerry: Sure!'
    messages = [
        {"role": "system", "content": "ignored"},
        {"role": "user", "content": "an earlier turn"},
        {"role": "assistant", "content": "ignored"},
        {"role": "user", "content": dialogue},
    ]
    rendered = bloom_tokenizer.apply_chat_template(
        messages,
        chat_template=inference_clm.chat_template(template, "summary"),
        tokenize=False,
        add_generation_prompt=True,
    )
    assert rendered == inference_clm.as_prompt(dialogue, template, "summary", bloom_tokenizer.eos_token)
    assert rendered.endswith(dialogue + "\n---\nSummary:\n") or "->" in template
    # A prefix with two input fields has no single place for the message: no template, said as None.
    assert inference_clm.chat_template("{title}: {dialogue}\n{summary}", "summary") is None


def test_from_pretrained_dtype_keyword_follows_the_transformers_version(monkeypatch):
    import transformers

    monkeypatch.setattr(transformers, "__version__", "4.51.3")
    assert inference_clm.dtype_keyword() == "torch_dtype"  # 4.51.3 refuses dtype=
    monkeypatch.setattr(transformers, "__version__", "4.56.2")
    assert inference_clm.dtype_keyword() == "dtype"


def test_rouge_lsum_scores_sentences_one_per_line():
    from rouge_score import rouge_scorer

    assert (
        run_clm.sentence_lines("Amanda baked. Jerry will eat! Ok?") == "Amanda baked.\nJerry will eat!\nOk?"
    )
    assert "rougeLsum" in run_clm.ROUGE_KEYS
    scorer = rouge_scorer.RougeScorer(["rougeL", "rougeLsum"])
    ref, pred = "amanda baked cookies. jerry will come.", "jerry will come. amanda baked cookies."
    split = scorer.score(run_clm.sentence_lines(ref), run_clm.sentence_lines(pred))
    # Sentence order does not matter to rougeLsum, which is the point of reporting it for dialogue summaries.
    assert split["rougeLsum"].fmeasure == pytest.approx(1.0)
    assert split["rougeL"].fmeasure < 1.0


def test_the_tiny_bloom_fits_every_quantization_paths_block_size(tmp_path):
    """The CPU-packed 4-bit layout (taken on CPUs with AVX-512 BF16 at inference) must accept every quantized
    layer; the repacking is plain torch, so this runs it on any CPU instead of depending on the one here."""
    import copy

    from bitsandbytes.functional import _convert_weight_packed_for_cpu
    from bitsandbytes.nn import Linear4bit
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    from hfpipe.fixtures.samsum import build_tiny_bloom

    model_dir = build_tiny_bloom(tmp_path / "bloom")
    config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True)
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, quantization_config=config, device_map={"": "cpu"}
    )
    layers = [m for m in model.modules() if isinstance(m, Linear4bit)]
    assert len(layers) == 4 * model.config.n_layer  # query_key_value, dense, dense_h_to_4h, dense_4h_to_h
    for layer in layers:
        state = copy.deepcopy(layer.weight.quant_state)
        assert layer.in_features % state.blocksize == 0, (layer.in_features, state.blocksize)
        packed, _ = _convert_weight_packed_for_cpu(layer.weight.data.clone(), state)
        assert packed.shape == (layer.out_features, layer.in_features // 2)
