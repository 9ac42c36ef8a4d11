/* What `activatorctl status` shows of one host, as control replies carry it. */
#pragma once

#include <json-c/json.h>

#include "activator/daemon/host/host.h"

json_object *ad_host_status_json(const ad_host *host);
