// tests/fuzz/fuzz_config.c: libFuzzer harness for the config parser: the input is a config file
// (config_load, then config_validate), and each of its lines is also applied as a command-line
// override (config_apply_arg). Any crash or sanitizer report is a bug.
#include "common/config.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* dir = fuzz_dir("config");
    const char* path = fuzz_write(dir, "in.conf", data, size);
    Config c;
    char err[2048];
    config_defaults(&c);
    if (config_load(&c, path, err, sizeof(err)) == 0) config_validate(&c, err, sizeof(err));
    // every line as a key=value override
    char* text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    config_defaults(&c);
    for (char* line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        config_apply_arg(&c, line, err, sizeof(err));
    config_validate(&c, err, sizeof(err));
    free(text);
    return 0;
}
