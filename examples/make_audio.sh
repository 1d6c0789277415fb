#!/usr/bin/env bash
# Regenerate examples/audio/*.wav deterministically with espeak-ng and sox (-D: no dither).
#   barge_in.wav: a question at 0.5 s, then "stop, wait a second" at 6.0 s, talking over the reply.
set -euo pipefail
cd "$(dirname "$0")/audio"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
say() {  # say TEXT OUT: speech trimmed to its first and last sample, PCM16 mono 24 kHz
  espeak-ng -v en-us -s 160 -w "$tmp/raw.wav" "$1"
  sox -D "$tmp/raw.wav" -r 24000 -c 1 -b 16 -e signed-integer "$2" \
    silence 1 0.005 0.5% reverse silence 1 0.005 0.5% reverse
}
say "what is the weather like today" "$tmp/q.wav"
say "stop, wait a second" "$tmp/s.wav"
sox -D "$tmp/q.wav" "$tmp/q_at.wav" pad 0.5 0
sox -D "$tmp/s.wav" "$tmp/s_at.wav" pad 6.0 0
sox -D -m -v 1 "$tmp/q_at.wav" -v 1 "$tmp/s_at.wav" "$tmp/mix.wav"
sox -D "$tmp/mix.wav" barge_in.wav pad 0 3.0
soxi barge_in.wav | grep -E "Duration|Sample Rate|Channels"
