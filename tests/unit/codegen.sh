#!/bin/sh
# The machine code of the inline reads (<timehands.h>) as the build's compiler
# made it: no stack slot that a function stores narrower than it loads it,
# and none that a call just wrote loaded wider than a word.
# x86 cannot forward such a store to the load: the load waits until the
# store reaches the cache, several nanoseconds on every read that takes the
# path (the REALTIME epoch, 16 bits, spilled across the counter read and
# reloaded 64 bits wide for the G3 compare, did this twice).
#
# With --reload: no load from a stack slot the function itself stored from
# a register, but right after a call (which may have written it), up to the
# next branch or store. Applied
# to callers of the inline reads that use the reading at once
# (codegen_reload.c): the reading stays in registers, and a caller that
# stores it and loads it back pays a store-to-load forward on the read's
# critical path.
# usage: codegen.sh [--reload] BINARY FUNCTION-REGEX
set -eu
mode=width
if [ "${1:-}" = --reload ]; then
	mode=reload
	shift
fi
bin=$1 re=$2
command -v objdump >/dev/null 2>&1 || { echo "SKIP: objdump is needed (Debian package: binutils)"; exit 77; }
case $(objdump -f "$bin" | sed -n 's/.*file format //p') in
elf64-x86-64) ;;
*) echo "SKIP: $bin is not x86-64 code (the check reads x86-64 machine code)"; exit 77 ;;
esac
objdump -d --no-show-raw-insn "$bin" | awk -v re="$re" -v mode="$mode" '
function width(r) {
	if (r ~ /^%r([abcd]x|si|di|bp|sp|[0-9]+)$/) return 64
	if (r ~ /^%(e([abcd]x|si|di|bp|sp)|r[0-9]+d)$/) return 32
	if (r ~ /^%([abcd]x|si|di|bp|sp|r[0-9]+w)$/) return 16
	if (r ~ /^%([abcd]l|sil|dil|bpl|spl|r[0-9]+b)$/) return 8
	if (r ~ /^%[xyz]mm/) return 128
	return 0
}
function suffix(m) {
	if (m ~ /^movz|^movs[bwl][wlq]$/) { c = substr(m, 5, 1); return c == "b" ? 8 : c == "w" ? 16 : 32 }
	c = substr(m, length(m), 1)
	return c == "q" ? 64 : c == "l" ? 32 : c == "w" ? 16 : c == "b" ? 8 : 0
}
# the end of a function: its stores against its loads
function flush(   s, i) {
	for (s in st)
		if (mode == "width" && s in ld && ld[s] > st[s]) {
			printf "%s: %s stored %d bits wide, loaded %d bits wide\n", fn, s, st[s], ld[s]
			bad++
		}
	for (i = 1; i <= nl; i++)
		if (ls[i] in st) {
			printf "%s: loads %s, which it stored: %s\n", fn, ls[i], li[i]
			bad++
		}
	delete st
	delete ld
	nl = 0
}
# width: the narrowest register store and the widest load of each slot;
# and no load wider than a word of what a call just wrote (the library
# stores a reading word by word)
function by_width(   w, i, x) {
	if (m ~ /^call/) { after = 1; return }
	if (m ~ /^(j|ret)/) { after = 0; return }
	if (after && k == 2 && o[1] ~ /\(%r[sb]p\)$/ && width(o[2]) > 64) {
		printf "%s: loads %s %d bits wide after a call (a reading is stored in words): %s\n", fn, o[1], width(o[2]), ins
		bad++
	}
	if (k != 2 || m == "lea" || ops ~ /\(%r[sb]p,/) return
	if (o[2] ~ /\(%r[sb]p\)$/ && m ~ /^mov[bwlq]?$/) {
		w = o[1] ~ /^\$/ ? suffix(m) : width(o[1])
		if (w > 0 && w < 64 && (!(o[2] in st) || st[o[2]] > w)) st[o[2]] = w
		return
	}
	for (i = 1; i <= 2; i++) {
		if (o[i] !~ /\(%r[sb]p\)$/) continue
		w = suffix(m)
		if (m !~ /^movz|^movs[bwl][wlq]$/) { x = width(o[3 - i]); if (x > 0 && x <= 64) w = x }
		if (w > ld[o[i]]) ld[o[i]] = w
	}
}
# reload: every slot stored from a register, and every load of a slot but
# those that follow a call, up to a branch or a store (they read what the
# call may have written)
function by_reload(   slot, i) {
	slot = "^(-?0x[0-9a-f]+)?\\(%r[sb]p\\)$"
	if (k == 2 && m ~ /^mov/ && o[1] ~ /^%/ && o[2] ~ slot) {
		st[o[2]] = 1
		after = 0
	} else if (m != "lea" && !after)
		for (i = 1; i <= k; i++)
			if (o[i] ~ slot && !(i == k && m ~ /^mov/)) {
				nl++
				ls[nl] = o[i]
				li[nl] = ins
			}
	if (m ~ /^call/)
		after = 1
	else if (m ~ /^(j|ret)/)
		after = 0
}
/^[0-9a-f]+ <.*>:$/ {
	flush()
	fn = $2
	gsub(/[<>:]/, "", fn)
	in_fn = fn ~ re
	if (in_fn) seen++
	after = 0
	next
}
in_fn && /\t/ {
	split($0, f, "\t")
	ins = f[2]
	m = ins; sub(/ .*/, "", m)
	ops = ins; sub(/^[^ ]+ +/, "", ops); sub(/ *#.*/, "", ops)
	k = split(ops, o, ",")
	if (mode == "reload") by_reload(); else by_width()
}
END {
	flush()
	if (!seen) { printf "no function matches %s\n", re; exit 1 }
	if (bad) exit 1
	if (mode == "reload") printf "codegen: %d functions, none loads back what it stored\n", seen
	else printf "codegen: %d functions, no stack slot stored narrower than it is loaded\n", seen
}'
