/* atbsim::Context: ATB ContextBase's probe calls (docs/atb_hooks.md §8). */
#include <cstdlib>
#include <cstring>

#include "internal.h"

namespace atbsim {

static bool AsyncFromEnv()
{
    const char *v = std::getenv("ATB_OPERATION_EXECUTE_ASYNC");
    return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "2") == 0);
}

/* ATB asks IsOverflowCheck at Init to create its overflow tensor; the
 * stand-in scans outputs instead, so only the call is reproduced. */
Context::Context() : async_(AsyncFromEnv())
{
    (void)atb::Probe::IsOverflowCheck();
}

Context::~Context()
{
    (void)atb::Probe::IsOverflowCheck();
}

void Context::SetExecuteStream(aclrtStream stream)
{
    stream_ = stream;
    (void)atb::Probe::IsOverflowCheck();  /* ATB: aclrtSetStreamOverflowSwitch */
}

}  // namespace atbsim
