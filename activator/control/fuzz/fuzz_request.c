/* libFuzzer target for the control request parser: any bytes a client can
 * send must yield either a valid request or a refusal with a code and a
 * sentence, never a crash, a leak or an out-of-bounds read. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "activator/control/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ctrl_request req;
    ctrl_request_error err;
    int r = ctrl_request_parse(data, size, &req, &err);
    if (r < 0) {
        /* Every refusal names a code and says something. */
        if (!err.code || err.error.message[0] == '\0')
            abort();
        return 0;
    }
    /* An accepted request only carries names that are safe path components. */
    if ((unsigned)req.op >= CTRL_OP__COUNT)
        abort();
    if (req.host[0] && !act_name_is_valid(req.host))
        abort();
    if (req.version[0] && !act_name_is_valid(req.version))
        abort();
    if (req.box[0] && !act_name_is_valid(req.box))
        abort();
    if (req.path[0] && req.path[0] != '/')
        abort();
    return 0;
}
