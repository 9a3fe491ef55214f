/* cmd_quantize: placeholder until `fp4serve quantize` lands (replace this file). */
#include <stdio.h>

#include "fp4.h"

int cmd_quantize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fp4serve: 'quantize' is not built yet\n");
    return FP_ERR_USAGE;
}
