#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script: a short check of every virtio-fs share this guest has: the
# primary one at $1 (tag myfs, mounted by /init) and each tag in $EXTRA_TAGS,
# mounted here at /mnt-TAG. Per share: the file the host wrote there
# (host.txt, "host file for TAG") is read; a file is created, written, read
# back, stat'ed, chmod'ed, renamed into a new directory, listed, symlinked and
# removed; a 1 MiB file is written and left for the host, which compares its
# checksum ("VUFS-SUM ... @TAG/keep.bin"; plain "keep.bin" for myfs).
# Prints "share TAG: ok" or "share TAG: FAIL <what>" per share and exits 1 if
# any failed.
# Settings: EXTRA_TAGS (set by run-guest.sh --device), SUBMOUNT_TAGS (tags
# whose share has a host mount point at sub/ that must reach the guest as a
# submount: a different st_dev).
MNT=$1
EXTRA_TAGS=
SUBMOUNT_TAGS=
[ -f /run/settings ] && . /run/settings
fails=0

# check TAG DIR SUMPREFIX
check() {
    tag=$1 d=$2 pre=$3 what=
    want="host file for $tag"
    got=$(cat "$d/host.txt" 2>&1)
    [ "$got" = "$want" ] || what="host.txt: '$got', wanted '$want'"
    if [ -z "$what" ]; then
        echo "hello from the guest on $tag" > "$d/g.txt" &&
            [ "$(cat "$d/g.txt")" = "hello from the guest on $tag" ] ||
            what="create/write/read g.txt"
    fi
    if [ -z "$what" ]; then
        st=$(stat -c '%s %F' "$d/g.txt")
        [ "$st" = "$(( ${#tag} + 25 )) regular file" ] || what="stat g.txt: $st"
    fi
    if [ -z "$what" ]; then
        chmod 640 "$d/g.txt" && [ "$(stat -c %a "$d/g.txt")" = 640 ] || what="chmod 640"
    fi
    if [ -z "$what" ]; then
        mkdir "$d/dir" && mv "$d/g.txt" "$d/dir/moved.txt" &&
            [ "$(ls "$d/dir")" = moved.txt ] && [ ! -e "$d/g.txt" ] || what="mkdir/rename/ls"
    fi
    if [ -z "$what" ]; then
        ln -s dir/moved.txt "$d/link" && [ "$(readlink "$d/link")" = dir/moved.txt ] &&
            [ "$(cat "$d/link")" = "hello from the guest on $tag" ] || what="symlink"
    fi
    if [ -z "$what" ]; then
        rm "$d/link" "$d/dir/moved.txt" && rmdir "$d/dir" &&
            [ ! -e "$d/dir" ] && [ ! -e "$d/link" ] || what="rm/rmdir"
    fi
    if [ -z "$what" ]; then
        names=$(ls -a "$d" | tr '\n' ' ')
        case "$names" in
        ". .. host.txt "|". .. host.txt sub ") ;;
        *) what="ls after rm: $names" ;;
        esac
    fi
    if [ -z "$what" ]; then
        case " $SUBMOUNT_TAGS " in
        *" $tag "*)
            # (stat of sub itself does not trigger the automount: look inside)
            if [ "$(cat "$d/sub/inner.txt" 2>&1)" != "inside the submount" ]; then
                what="sub/inner.txt not readable"
            elif [ "$(stat -c %d "$d")" = "$(stat -c %d "$d/sub/inner.txt")" ]; then
                what="sub/ is not a submount (same st_dev as the share)"
            fi
            ;;
        esac
    fi
    if [ -z "$what" ]; then
        dd if=/dev/urandom of="$d/keep.bin" bs=64k count=16 2> /dev/null || what="write keep.bin"
    fi
    if [ -n "$what" ]; then
        echo "share $tag: FAIL $what"
        fails=$((fails + 1))
        return
    fi
    echo "share $tag: ok ($(ls "$d" | tr '\n' ' '))"
    keep="$keep $d/keep.bin:$pre"
}

keep=
check myfs "$MNT" ""
for t in $EXTRA_TAGS; do
    mkdir -p "/mnt-$t"
    if ! mount -t virtiofs "$t" "/mnt-$t" 2> /tmp/mount.err; then
        echo "share $t: FAIL mount: $(cat /tmp/mount.err)"
        fails=$((fails + 1))
        continue
    fi
    check "$t" "/mnt-$t" "@$t/"
done

# The host compares what the guest read back with what reached its disk.
sync
echo 3 > /proc/sys/vm/drop_caches
for k in $keep; do
    echo "VUFS-SUM $(sha256sum "${k%%:*}" | cut -d' ' -f1) ${k#*:}keep.bin"
done
for t in $EXTRA_TAGS; do
    umount "/mnt-$t" 2> /dev/null
done
echo "share-check: $fails failures"
[ $fails = 0 ]
