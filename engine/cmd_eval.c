/* cmd_eval: placeholder until `fp4serve eval` lands (replace this file). */
#include <stdio.h>

#include "fp4.h"

int cmd_eval(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fp4serve: 'eval' is not built yet\n");
    return FP_ERR_USAGE;
}
