#!/usr/bin/env python3
"""Word error rate and segment-start accuracy of lifeos's transcripts, side by side with
whisper.cpp's own command-line program on the same audio, model and decoding settings.

Called by wer.sh, which builds lifeos and whisper-cli and installs the models:

    wer.py gen  WORK                      make the recordings and their reference
    wer.py score WORK LIFEOS CLI MODELS.. transcribe with both, score, print Markdown

The recordings are spoken by espeak-ng (two voices at two speeds), each a run of
sentences after known silences, clean and with pink noise mixed in by ffmpeg. The true
start of each sentence is where its first loud sample is in the recording.
"""

import json
import os
import re
import subprocess
import sys
import time
import wave
from array import array

# Harvard sentences (IEEE Recommended Practice for Speech Quality Measurements, 1969),
# lists 1 and 2: phonetically balanced, in the public domain.
SENTENCES = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
    "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.",
    "The hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us.",
    "A large size in stockings is hard to sell.",
    "The boy was there when the sun rose.",
    "A rod is used to catch pink salmon.",
    "The source of the huge river is the clear spring.",
    "Kick the ball straight and follow through.",
    "Help the woman get back to her feet.",
    "A pot of tea helps to pass the evening.",
]
VOICES = ["en-us", "en-gb"]
SPEEDS = [140, 190]  # words per minute (espeak-ng -s); 175 is its default
GAPS = [1.0, 1.6, 1.2, 2.0, 1.4, 1.8]  # seconds of silence before each sentence, in turn
RATE = 16000
NOISE = "anoisesrc=color=pink:amplitude=0.05:seed=7:r=16000"


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2, path
        return w.getframerate(), array("h", w.readframes(w.getnframes()))


def write_wav(path, samples):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(samples.tobytes())


def loud(samples, threshold=300):
    """Index of the first and last sample louder than `threshold`."""
    idx = [i for i, s in enumerate(samples) if abs(s) > threshold]
    return idx[0], idx[-1]


def gen(work):
    audio = os.path.join(work, "audio")
    os.makedirs(audio, exist_ok=True)
    reference = []
    for voice in VOICES:
        for speed in SPEEDS:
            name = f"{voice}-{speed}"
            out = array("h")
            sentences = []
            for i, text in enumerate(SENTENCES):
                clip = os.path.join(work, "clip.wav")
                clip16 = os.path.join(work, "clip16.wav")
                run("espeak-ng", "-v", voice, "-s", str(speed), "-w", clip, text)
                run("ffmpeg", "-loglevel", "error", "-y", "-i", clip, "-ar", str(RATE), "-ac", "1", clip16)
                _, s = read_wav(clip16)
                first, last = loud(s)
                out.extend([0] * int(GAPS[i % len(GAPS)] * RATE))
                sentences.append({
                    "text": text,
                    "start": (len(out) + first) / RATE,
                    "end": (len(out) + last) / RATE,
                })
                out.extend(s[: last + 1])
            out.extend([0] * RATE)
            clean = os.path.join(audio, f"{name}-clean.wav")
            write_wav(clean, out)
            noisy = os.path.join(audio, f"{name}-noise.wav")
            run("ffmpeg", "-loglevel", "error", "-y", "-i", clean, "-f", "lavfi", "-i", NOISE,
                "-filter_complex", "amix=inputs=2:duration=first:normalize=0",
                "-ar", str(RATE), "-ac", "1", "-c:a", "pcm_s16le", noisy)
            for f, noise in ((clean, False), (noisy, True)):
                reference.append({
                    "file": os.path.basename(f), "voice": voice, "speed": speed,
                    "noise": noise, "sentences": sentences,
                })
    with open(os.path.join(work, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)


def words(text):
    text = text.lower().replace("’", "'")
    return re.sub(r"[^a-z0-9']+", " ", text).split()


def edit_distance(ref, hyp):
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


def lifeos_segments(work, lifeos, models_dir, model, default_model):
    """lifeos's transcripts: one ingest in a repository holding the recordings, then
    `extract show --json` for each."""
    repo = os.path.join(work, "repo")
    env = dict(os.environ, LIFEOS_MODELS=models_dir)
    if not os.path.isdir(os.path.join(repo, ".lifeos")):
        os.makedirs(repo, exist_ok=True)
        subprocess.run([lifeos, "init", "-q", repo], check=True, env=env)
        for f in sorted(os.listdir(os.path.join(work, "audio"))):
            os.link(os.path.join(work, "audio", f), os.path.join(repo, f))
        subprocess.run([lifeos, "-C", repo, "commit", "-q", "-m", "recordings"], check=True, env=env)
    args = [lifeos, "-C", repo, "ingest", "--json"]
    if model != default_model:
        args[4:4] = ["--model", model]
    report = json.loads(subprocess.run(args, check=True, env=env, capture_output=True).stdout)
    out = {}
    for f in sorted(os.listdir(os.path.join(work, "audio"))):
        shown = json.loads(subprocess.run(
            [lifeos, "-C", repo, "extract", "show", f, "--model", model, "--json"],
            check=True, env=env, capture_output=True).stdout)
        x = [x for x in shown["extracts"] if x["model"] == model][0]
        out[f] = [(s["anchor"]["start_ms"] / 1000, s["text"])
                  for s in x["segments"] if s["kind"] == "speech"]
    return out, report


def cli_segments(work, cli, model_path, multilingual, flash):
    """whisper-cli's transcripts: greedy decoding (beam size 1, best of 1), one thread,
    English for an English-only model and language detection for a multilingual one, as
    lifeos decodes; flash attention off as in lifeos (`-nfa`), or on (its default)."""
    out = {}
    dest = os.path.join(work, f"cli-{'fa' if flash else 'nfa'}-" + os.path.basename(model_path))
    os.makedirs(dest, exist_ok=True)
    for f in sorted(os.listdir(os.path.join(work, "audio"))):
        base = os.path.join(dest, f)
        subprocess.run(
            [cli, "-m", model_path, "-f", os.path.join(work, "audio", f), "-t", "1",
             "-l", "auto" if multilingual else "en", "-bs", "1", "-bo", "1",
             "-fa" if flash else "-nfa", "-oj", "-of", base, "-np"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(base + ".json", encoding="utf-8", errors="replace") as j:
            doc = json.load(j)
        out[f] = [(t["offsets"]["from"] / 1000, t["text"].strip())
                  for t in doc["transcription"] if t["text"].strip()]
    return out


def score(reference, segments):
    """(word errors, reference words, sentences, sentences with a segment starting within
    0.5 s of their true start), per condition key."""
    per = {}
    for rec in reference:
        segs = segments[rec["file"]]
        ref = [w for s in rec["sentences"] for w in words(s["text"])]
        hyp = [w for _, t in segs for w in words(t)]
        starts = [s for s, _ in segs]
        near = sum(1 for s in rec["sentences"]
                   if starts and min(abs(st - s["start"]) for st in starts) <= 0.5)
        key = "noise" if rec["noise"] else "clean"
        e = per.setdefault(key, [0, 0, 0, 0])
        e[0] += edit_distance(ref, hyp)
        e[1] += len(ref)
        e[2] += len(rec["sentences"])
        e[3] += near
    return per


def main():
    cmd, work = sys.argv[1], sys.argv[2]
    if cmd == "gen":
        gen(work)
        return
    lifeos, cli, models_dir = sys.argv[3], sys.argv[4], sys.argv[5]
    models = sys.argv[6:]
    with open(os.path.join(work, "reference.json")) as f:
        reference = json.load(f)
    listing = json.loads(subprocess.run(
        [lifeos, "model", "list", "--json"], check=True, capture_output=True,
        env=dict(os.environ, LIFEOS_MODELS=models_dir)).stdout)
    default = next(m["name"] for m in listing["models"] if m.get("default"))
    multilingual = {m["name"]: m["multilingual"] for m in listing["models"]}
    rows = []
    for model in models:
        ours, report = lifeos_segments(work, lifeos, models_dir, model, default)
        path = os.path.join(models_dir, model + ".bin")
        rows.append((model, "lifeos", score(reference, ours)))
        for flash, tool in ((False, "whisper-cli -nfa (as lifeos)"),
                            (True, "whisper-cli, flash attention (its default)")):
            started = time.monotonic()
            theirs = cli_segments(work, cli, path, multilingual[model], flash)
            print(f"{model}: {tool} took {time.monotonic() - started:.1f} s", file=sys.stderr)
            rows.append((model, tool, score(reference, theirs)))
        if report.get("audio_seconds"):
            print(f"{model}: lifeos transcribed {report['audio_seconds']:.1f} s of audio in "
                  f"{report['speech_seconds']:.1f} s", file=sys.stderr)
    sentences = sum(len(r["sentences"]) for r in reference)
    print(f"{len(reference)} recordings, {sentences} sentences "
          f"({len(SENTENCES)} Harvard sentences x voices {', '.join(VOICES)} x "
          f"{' and '.join(map(str, SPEEDS))} wpm x clean and pink noise)\n")
    print("| model | program | WER clean | WER noise | WER all | sentences whose start a segment's is within 0.5 s of |")
    print("|---|---|---:|---:|---:|---:|")
    for model, tool, per in rows:
        tot = [sum(v[i] for v in per.values()) for i in range(4)]
        wer = lambda e: f"{100 * e[0] / e[1]:.1f}%"
        print(f"| {model} | {tool} | {wer(per['clean'])} | {wer(per['noise'])} | {wer(tot)} | "
              f"{tot[3]}/{tot[2]} ({100 * tot[3] / tot[2]:.1f}%) |")


if __name__ == "__main__":
    main()
