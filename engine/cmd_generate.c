/* cmd_generate: placeholder until `fp4serve generate` lands (replace this file). */
#include <stdio.h>

#include "fp4.h"

int cmd_generate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fp4serve: 'generate' is not built yet\n");
    return FP_ERR_USAGE;
}
