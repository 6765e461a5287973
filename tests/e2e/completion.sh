#!/bin/sh
# hydra completion bash|zsh: the script is sourced in bash and its completion function is
# called as bash would call it (COMP_WORDS / COMP_CWORD); the offered words are checked.
set -eu
HYDRA=${HYDRA:-./hydra}
command -v bash >/dev/null || { echo "bash not installed"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$HYDRA" completion bash >"$T/c.bash"
"$HYDRA" completion zsh >"$T/c.zsh"
head -n 1 "$T/c.zsh" | grep -q bashcompinit || { echo "zsh script does not load bashcompinit"; exit 1; }
if "$HYDRA" completion fish >/dev/null 2>"$T/err"; then echo "completion fish accepted"; exit 1; fi
grep -q "expected bash or zsh" "$T/err" || { cat "$T/err"; exit 1; }
# complete WORDS...: the words offered for the last word of the line
cat >"$T/run.bash" <<'EOS'
. "$1"
shift
COMP_WORDS=("$@")
COMP_CWORD=$(( $# - 1 ))
_hydra
printf '%s\n' "${COMPREPLY[@]}"
EOS
complete() { bash "$T/run.bash" "$T/c.bash" "$@"; }
expect() {   # expect WORD LINE...: WORD is among the completions of LINE
    w=$1; shift
    complete "$@" | grep -qx -- "$w" || { echo "completing '$*' does not offer '$w':"; complete "$@"; exit 1; }
}
reject() {
    w=$1; shift
    if complete "$@" | grep -qx -- "$w"; then echo "completing '$*' offers '$w'"; exit 1; fi
}
expect predict hydra pre
expect pretrain hydra pre
reject train hydra pre
expect --mc-samples hydra predict --mc
expect --batch-size hydra predict --b
reject --mc-samples hydra train --mc
expect --slurm-time hydra sweep --slurm-t
expect train.epochs= hydra exp configs/experiments/quick.yaml train.ep
expect hydra.members= hydra exp configs/experiments/quick.yaml hydra.mem
expect --deep-ensemble hydra hydraize --deep
expect --base-epochs hydra hydraize --base
expect model.from= hydra exp configs/experiments/hydraize.yaml model.fr
expect data.sources= hydra hydraize src data.sou
expect configs/experiments/quick.yaml hydra exp configs/experiments/qu
expect data.id=configs hydra exp x.yaml data.id=conf
expect model=vit-fm hydra exp configs/experiments/quick.yaml model=vit
expect data=fashion-mnist hydra exp configs/experiments/quick.yaml data=fa
echo "completion: ok"
