"""What records each recipe's training script reads, so `hfpipe data upload --recipe` can check a data set
before it goes to S3 (stdlib only).

- question-answering (run_qa.py): SQuAD v1.1 JSON (``{"data": [{"paragraphs": [{"context", "qas": [...]}]}]}``)
  or rows with the hub ``squad`` columns: ``question``, ``context`` (strings) and ``answers`` =
  ``{"text": [...], "answer_start": [...]}`` (training_code/qa_utils.py load_squad_json).
- text-classification (run_classification.py): a text column and an optional pair column (``premise`` /
  ``hypothesis`` with ``task_name: mnli``, else ``text`` / ``text_pair``, or the ``text_column`` /
  ``text_pair_column`` or ``text_column_names: "a,b"`` hyperparameters) and an integer label column
  (``label_column`` / ``label_column_name``, default ``label``).
- summarization / text-generation (run_clm.py): every field of the recipe's ``prompt_template`` (default:
  the samsum ``dialogue`` and ``summary``) as a string.

Which columns a task reads is its task kind's rule (hfpipe/kinds/tasks.py); this module reads and checks
the records.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hfpipe.core.recipe.typed import Recipe
from hfpipe.kinds import task_kind


def expected_columns(recipe: Recipe) -> dict[str, str]:
    """{column: kind} the recipe's script reads; kind is "string", "integer" or "answers".

    The rule is the recipe's task kind's (hfpipe/kinds/tasks.py); an unknown task is refused by name."""
    return task_kind(recipe["task"]).record_columns(recipe["training"]["hyperparameters"])


def squad_rows(doc: Any) -> Iterable[Any]:
    """Rows of a SQuAD v1.1 document (nested articles) or of an already flat list."""
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        for article in doc["data"]:
            for paragraph in article.get("paragraphs", []) if isinstance(article, dict) else [None]:
                if not isinstance(paragraph, dict):
                    yield paragraph
                    continue
                for qa in paragraph.get("qas", []):
                    if isinstance(qa, dict):
                        yield {
                            "question": qa.get("question"),
                            "context": paragraph.get("context"),
                            "answers": {
                                "text": [a.get("text") for a in qa.get("answers", []) if isinstance(a, dict)],
                                "answer_start": [
                                    a.get("answer_start")
                                    for a in qa.get("answers", [])
                                    if isinstance(a, dict)
                                ],
                            },
                        }
                    else:
                        yield qa
    elif isinstance(doc, list):
        yield from doc
    else:
        yield doc


def record_problem(record: Any, columns: dict[str, str]) -> str | None:
    """Why ``record`` is not one the script reads (naming the column and what is accepted), or None."""
    if not isinstance(record, dict):
        return f"a record is {type(record).__name__}, not an object with {sorted(columns)}"
    for column, kind in columns.items():
        value = record.get(column)
        if kind == "string" and (not isinstance(value, str) or not value.strip()):
            return f"column {column!r} is {value!r}; accepted: a non-empty string"
        if kind == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
            return f"column {column!r} is {value!r}; accepted: an integer label id"
        if kind == "answers":
            ok = (
                isinstance(value, dict)
                and isinstance(value.get("text"), list)
                and isinstance(value.get("answer_start"), list)
                and len(value["text"]) == len(value["answer_start"]) > 0
                and all(isinstance(t, str) for t in value["text"])
                and all(isinstance(s, int) and not isinstance(s, bool) for s in value["answer_start"])
            )
            if not ok:
                return (
                    f"column 'answers' is {value!r}; accepted: "
                    '{"text": [strings], "answer_start": [integers]} of the same non-zero length'
                )
    return None
