/* What `activatorctl status` shows of one host, as control replies carry it. */
#pragma once

#include <json-c/json.h>

#include "activator/daemon/host.h"

json_object *act_host_status_json(const act_daemon_host *host);
