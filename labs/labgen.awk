# labgen: makes a lab's learner file from a reference module (one source of truth).
#
# In the reference source an exercise region is marked by line comments:
#
#       // LAB:BEGIN index-build
#       ... reference code, dropped from the learner file ...
#       // LAB:STUB return LAB_TODO("index-build");
#       // LAB:END
#
# Every LAB:STUB line becomes a code line (the text after "LAB:STUB "), and the
# region is introduced by a comment that names it and the lab README.
#
#   awk -v src=lib/x.c -v readme=labs/01-dataset/README.md [-v only=REGION] -f labs/labgen.awk lib/x.c
#
# only=REGION stubs that region alone and keeps the others' reference code: the
# grader self-check uses it to prove that each region on its own is tested.
BEGIN {
    printf "/* Lab file generated from %s by labs/labgen.awk: write the LAB regions (see %s). */\n", src, readme
    print "#include \"lab_todo.h\""
    region = ""
}
/^[ \t]*\/\/ LAB:BEGIN / {
    if (region != "") { print "labgen: " FILENAME ":" FNR ": LAB:BEGIN inside region " region > "/dev/stderr"; exit 1 }
    region = $3; stubbed = (only == "" || only == region); seen[region] = 1
    if (stubbed) {
        indent = $0; sub(/\/\/.*/, "", indent)
        printf "%s/* LAB %s: your code here (see %s). */\n", indent, region, readme
    }
    next
}
/^[ \t]*\/\/ LAB:STUB / {
    if (region == "") { print "labgen: " FILENAME ":" FNR ": LAB:STUB outside a region" > "/dev/stderr"; exit 1 }
    if (stubbed) { line = $0; sub(/\/\/ LAB:STUB /, "", line); print line }
    next
}
/^[ \t]*\/\/ LAB:END/ {
    if (region == "") { print "labgen: " FILENAME ":" FNR ": LAB:END outside a region" > "/dev/stderr"; exit 1 }
    region = ""; next
}
{ if (region == "" || !stubbed) print }
END {
    if (region != "") { print "labgen: " FILENAME ": region " region " is never closed" > "/dev/stderr"; exit 1 }
    if (only != "" && !(only in seen)) { print "labgen: " FILENAME ": no region named " only > "/dev/stderr"; exit 1 }
}
