/* cmd_bench: placeholder until `fp4serve bench` lands (replace this file). */
#include <stdio.h>

#include "fp4.h"

int cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fp4serve: 'bench' is not built yet\n");
    return FP_ERR_USAGE;
}
