#include "activator/control/nng_errno.h"

#include <errno.h>

#include <nng/nng.h>

int ctrl_nng_errno(int nng_rv)
{
    if (nng_rv & NNG_ESYSERR)
        return nng_rv & ~NNG_ESYSERR;
    switch (nng_rv) {
    case NNG_EINTR:
        return EINTR;
    case NNG_ENOMEM:
        return ENOMEM;
    case NNG_EINVAL:
    case NNG_EADDRINVAL:
        return EINVAL;
    case NNG_EBUSY:
        return EBUSY;
    case NNG_ETIMEDOUT:
        return ETIMEDOUT;
    case NNG_ECONNREFUSED:
        return ECONNREFUSED;
    case NNG_ECLOSED:
        return EBADF;
    case NNG_EAGAIN:
        return EAGAIN;
    case NNG_ENOTSUP:
        return EOPNOTSUPP;
    case NNG_EADDRINUSE:
        return EADDRINUSE;
    case NNG_ENOENT:
        return ENOENT;
    case NNG_EPERM:
        return EPERM;
    case NNG_EMSGSIZE:
        return EMSGSIZE;
    case NNG_ECONNABORTED:
        return ECONNABORTED;
    case NNG_ECONNRESET:
        return ECONNRESET;
    case NNG_ECANCELED:
        return ECANCELED;
    case NNG_ENOFILES:
        return EMFILE;
    case NNG_ENOSPC:
        return ENOSPC;
    case NNG_EEXIST:
        return EEXIST;
    case NNG_EPEERAUTH:
    case NNG_ECRYPTO:
        return EACCES;
    case NNG_EUNREACHABLE:
        return EHOSTUNREACH;
    default:
        return EIO;
    }
}
