"""A probe as a job on the engine queue.

A probe runs through the same :class:`app.run_queue.RunManager` as "Run live": one at a time, a
queued place shown, 429 past the bound, cancelled when its client goes away.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from app.run_messages import MessageKind, RunMessage
from app.run_queue import LiveRun, RunStopped
from engine.decoder.loading import ModelPair
from engine.decoder.ngram import PromptLookup
from engine.measure.probe import (
    ProbeConfig,
    ProbeResult,
    PromptMeasure,
    fit_prompts,
    plan,
    probe,
    summarize_probe,
)
from engine.measure.prompt_sets import Prompt
from engine.serving.client import VllmClient, VllmError
from engine.serving.probe import probe_and_compare


def probe_job(
    prompts: list[Prompt], config: ProbeConfig, notices: list[str],
    keep: Callable[..., RunMessage] | None = None,
    vllm_url: str | None = None,
    drafter: str = "model",
) -> Callable[[LiveRun, ModelPair, Callable], None]:
    """What the engine thread runs for one probe: a ``progress`` message per prompt run, then
    one ``probe`` message with the :class:`ProbeResult`, and then ``keep``'s message (where the
    result was saved, or why not). A probe that reaches the time limit reports (and keeps) what
    it measured; one whose client left reports nothing.

    With ``vllm_url`` the prompts go through that vLLM server first (its counters give the
    table), then through our engine, which warns where vLLM accepts far fewer drafts.

    ``drafter``: "model", "ngram" (prompt lookup, vLLM's rule at its default n-gram range) or
    "both": the draft model, then prompt lookup on the same prompts; the ``probe`` message
    then carries both results (``probe``, ``probe_ngram``) and ``keep`` gets both."""
    drafters = ["model", "ngram"] if drafter == "both" else [drafter]
    configs = [replace(config, lookup=PromptLookup() if d == "ngram" else None)
               for d in drafters]

    def job(run: LiveRun, pair: ModelPair, guard: Callable) -> None:
        fitted, cut = fit_prompts(pair, prompts, config)
        runs = len(plan(fitted, config))
        total = runs * (2 if vllm_url else len(configs))
        done = 0

        def measure(events, engine: str, notes: list[str],
                    config: ProbeConfig = configs[0]) -> ProbeResult:
            nonlocal done
            measures: list[PromptMeasure] = []
            stopped: list[str] = []
            try:
                for m in guard(events):
                    if not isinstance(m, PromptMeasure):
                        continue  # a cycle or a step: the guard may stop the probe between them
                    measures.append(m)
                    done += 1
                    run.post(RunMessage(MessageKind.PROGRESS, progress={
                        "done": done, "total": total, "domain": m.domain,
                        "temperature": m.temperature, "engine": engine,
                        "drafter": config.drafter}))
            except RunStopped as stop:
                if not str(stop) or not measures:
                    raise
                stopped.append(f"{stop}; the table pools the prompts measured by then.")
            except VllmError as error:
                raise RunStopped(f"the vLLM server: {error}") from None
            return summarize_probe(
                measures, config, engine=engine, target=pair.target_name,
                draft=pair.draft_name or "", runs_planned=runs, notices=notes + stopped)

        if vllm_url is None:
            results = [measure(probe(pair, fitted, cfg, steps=True), "specscope", notices + cut,
                               cfg) for cfg in configs]
        else:
            client = VllmClient(vllm_url, timeout_s=60.0)
            try:  # reading the server's k happens before any measure: say whose error it is
                results = [probe_and_compare(client, pair, fitted, config, measure,
                                             notices=notices + cut, steps=True).vllm]
            except VllmError as error:
                raise RunStopped(f"the vLLM server: {error}") from None
        both = results[1] if len(results) == 2 else None
        run.post(RunMessage(MessageKind.PROBE, probe=results[0], probe_ngram=both))
        if keep is not None:
            run.post(keep(results[0], pair, both))

    return job
