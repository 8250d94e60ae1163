// common/cli.h: the option table a tool's command line is parsed by. A tool lists its options
// once (name, kind, where the value goes, the accepted range) and cli_parse walks argv over the
// table; the tool keeps its own wording of the two errors (an unknown argument, an option
// without its value) and its own exit, so each tool's messages stay its own. Numbers go through
// util_cli_long / util_cli_double: a value out of range or not a number ends the process with
// exit 2 naming the option and the value.
//
//   const char* out = NULL; int n = 3, raw = 0;
//   const CliOpt opts[] = {CLI_STR_OPT("--out", &out), CLI_STR_OPT("-o", &out),
//                          CLI_INT_OPT("--n", &n, 1, 1000), CLI_FLAG_OPT("--raw", &raw)};
//   const CliTool tool = {.usage = usage, .unknown = "unknown option '%s'",
//                         .no_value = "%s needs a value"};
//   cli_parse_or_exit(argc, argv, 1, opts, CLI_COUNT(opts), &tool);
//
// cli_parse and cli_parse_args return how they stopped, for a caller with its own handling;
// cli_parse_or_exit and cli_parse_args_or_exit answer --help and the errors the way the tool's
// CliTool says and return only when every argument parsed. The row macros check the type of the
// destination at compile time.
#ifndef ATTNLAB_CLI_H
#define ATTNLAB_CLI_H

#include <stdio.h>

typedef enum {
    CLI_STR,    // const char*: the next argument, as given
    CLI_FLAG,   // int: set to 1, no value
    CLI_INT,    // int: util_cli_long in [lo, hi]
    CLI_LONG,   // long: util_cli_long in [lo, hi]
    CLI_FLOAT,  // float: util_cli_double in [lo, hi]
    CLI_DOUBLE, // double: util_cli_double in [lo, hi]
    CLI_FN, // the tool's own parser: fn(name, value, dst), which ends the process on a bad value
} CliKind;

typedef struct {
    const char* name; // "--checkpoint" (a second spelling such as "-o" is a row of its own)
    CliKind kind;
    void* dst;     // where the value goes (the type the kind names)
    double lo, hi; // numbers: the accepted range (integers: exact in a double, or beyond LONG_MAX)
    void (*fn)(const char* name, const char* value, void* dst); // CLI_FN
} CliOpt;

#define CLI_ROW_(NAME, KIND, TYPE, DST, LO, HI)                                                    \
    { .name = (NAME), .kind = (KIND), .dst = (void*)(1 ? (DST) : (TYPE*)0), .lo = (LO), .hi = (HI) }
#define CLI_STR_OPT(NAME, DST)            CLI_ROW_(NAME, CLI_STR, const char*, DST, 0, 0)
#define CLI_FLAG_OPT(NAME, DST)           CLI_ROW_(NAME, CLI_FLAG, int, DST, 0, 0)
#define CLI_INT_OPT(NAME, DST, LO, HI)    CLI_ROW_(NAME, CLI_INT, int, DST, LO, HI)
#define CLI_LONG_OPT(NAME, DST, LO, HI)   CLI_ROW_(NAME, CLI_LONG, long, DST, LO, HI)
#define CLI_FLOAT_OPT(NAME, DST, LO, HI)  CLI_ROW_(NAME, CLI_FLOAT, float, DST, LO, HI)
#define CLI_DOUBLE_OPT(NAME, DST, LO, HI) CLI_ROW_(NAME, CLI_DOUBLE, double, DST, LO, HI)
#define CLI_FN_OPT(NAME, FN, DST)                                                                  \
    { .name = (NAME), .kind = CLI_FN, .dst = (DST), .fn = (FN) }
#define CLI_COUNT(OPTS) ((int)(sizeof(OPTS) / sizeof((OPTS)[0])))

enum {
    CLI_DONE = 0,      // every argument parsed
    CLI_HELP = 1,      // --help or -h (the arguments after it are not looked at)
    CLI_UNKNOWN = -1,  // *bad: an argument the table does not name
    CLI_NO_VALUE = -2, // *bad: an option that takes a value, given last
    CLI_EXTRA = -3,    // *bad: one argument more than cli_parse_args takes
};

// Parse argv[first..argc) over opts[0..nopts), left to right (a later value replaces an earlier
// one). CLI_DONE, CLI_HELP, or CLI_UNKNOWN / CLI_NO_VALUE with *bad the argument at fault.
int cli_parse(int argc, char** argv, int first, const CliOpt* opts, int nopts, const char** bad);
// The same for a command line with arguments besides the options: each argument that is not an
// option (it does not start with '-', or it is "-" alone, standard input) goes to pos[*npos++],
// at most maxpos of them (one more: CLI_EXTRA); an argument starting with '-' that the table does
// not name is CLI_UNKNOWN.
int cli_parse_args(int argc, char** argv, int first, const CliOpt* opts, int nopts,
                   const char** pos, int maxpos, int* npos, const char** bad);

// How a tool answers the ways a parse stops short, in its own words. Each message is a printf
// format with one %s, the argument at fault.
typedef struct {
    void (*usage)(FILE* f); // --help or -h: usage(stdout), exit 0
    const char* unknown;    // an argument the table does not name (CLI_UNKNOWN)
    const char* no_value;   // an option that takes a value, given last (CLI_NO_VALUE)
    const char* extra;      // one argument more than cli_parse_args_or_exit takes (CLI_EXTRA)
    int usage_first;        // 1: usage(stderr) before the message
    // The tool's own way to print the message and end the process with exit 2 (it must not
    // return); NULL: die(EXIT_USAGE, message).
    void (*fail)(const char* fmt, const char* arg);
} CliTool;

// cli_parse / cli_parse_args, answering CLI_HELP and the errors as `tool` says: returns only
// when every argument parsed.
void cli_parse_or_exit(int argc, char** argv, int first, const CliOpt* opts, int nopts,
                       const CliTool* tool);
void cli_parse_args_or_exit(int argc, char** argv, int first, const CliOpt* opts, int nopts,
                            const char** pos, int maxpos, int* npos, const CliTool* tool);

#endif
