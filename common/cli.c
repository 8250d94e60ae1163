// common/cli.c: the tools' option-table parser (cli.h).
#include "common/cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

// A range bound of a CLI_INT or CLI_LONG row (a bound past LONG_MAX, such as (double)LONG_MAX
// itself, which rounds up to 2^63, means LONG_MAX).
static long bound(double x) {
    return x >= (double)LONG_MAX ? LONG_MAX : x <= (double)LONG_MIN ? LONG_MIN : (long)x;
}

static const CliOpt* find(const CliOpt* opts, int nopts, const char* a) {
    for (int k = 0; k < nopts; k++)
        if (!strcmp(a, opts[k].name)) return &opts[k];
    return NULL;
}

int cli_parse(int argc, char** argv, int first, const CliOpt* opts, int nopts, const char** bad) {
    int npos = 0;
    return cli_parse_args(argc, argv, first, opts, nopts, NULL, 0, &npos, bad);
}

int cli_parse_args(int argc, char** argv, int first, const CliOpt* opts, int nopts,
                   const char** pos, int maxpos, int* npos, const char** bad) {
    *bad = NULL;
    *npos = 0;
    for (int i = first; i < argc; i++) {
        const char* a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return CLI_HELP;
        const CliOpt* o = find(opts, nopts, a);
        if (!o && maxpos > 0 && (a[0] != '-' || !a[1])) { // an argument, not an option
            if (*npos == maxpos) {
                *bad = a;
                return CLI_EXTRA;
            }
            pos[(*npos)++] = a;
            continue;
        }
        if (!o) {
            *bad = a;
            return CLI_UNKNOWN;
        }
        if (o->kind == CLI_FLAG) {
            *(int*)o->dst = 1;
            continue;
        }
        if (i + 1 >= argc) {
            *bad = a;
            return CLI_NO_VALUE;
        }
        const char* v = argv[++i];
        switch (o->kind) {
        case CLI_STR:
            *(const char**)o->dst = v;
            break;
        case CLI_INT:
            *(int*)o->dst = (int)util_cli_long(a, v, bound(o->lo), bound(o->hi));
            break;
        case CLI_LONG:
            *(long*)o->dst = util_cli_long(a, v, bound(o->lo), bound(o->hi));
            break;
        case CLI_FLOAT:
            *(float*)o->dst = (float)util_cli_double(a, v, o->lo, o->hi);
            break;
        case CLI_DOUBLE:
            *(double*)o->dst = util_cli_double(a, v, o->lo, o->hi);
            break;
        case CLI_FN:
            o->fn(a, v, o->dst);
            break;
        case CLI_FLAG:
            break;
        }
    }
    return CLI_DONE;
}

// The answer to how a parse stopped (cli_parse_or_exit): returns only on CLI_DONE.
static void answer(int got, const char* bad, const CliTool* tool) {
    if (got == CLI_DONE) return;
    if (got == CLI_HELP) {
        tool->usage(stdout);
        exit(0);
    }
    const char* fmt = got == CLI_UNKNOWN    ? tool->unknown
                      : got == CLI_NO_VALUE ? tool->no_value
                                            : tool->extra;
    ASSERT(fmt != NULL);
    if (tool->usage_first) tool->usage(stderr);
    if (tool->fail) tool->fail(fmt, bad);
    die(EXIT_USAGE, fmt, bad);
}

void cli_parse_or_exit(int argc, char** argv, int first, const CliOpt* opts, int nopts,
                       const CliTool* tool) {
    const char* bad;
    const int got = cli_parse(argc, argv, first, opts, nopts, &bad);
    answer(got, bad, tool);
}

void cli_parse_args_or_exit(int argc, char** argv, int first, const CliOpt* opts, int nopts,
                            const char** pos, int maxpos, int* npos, const CliTool* tool) {
    const char* bad;
    const int got = cli_parse_args(argc, argv, first, opts, nopts, pos, maxpos, npos, &bad);
    answer(got, bad, tool);
}
