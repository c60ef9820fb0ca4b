/* ATB-Models' placeholder atb_speed::SpeedProbe (docs/atb_hooks.md §1.2, §9): strong
 * definitions an LD_PRELOAD probe replaces. Own TU, so calls go through the PLT. */
#include "atb/probe.h"

namespace atb_speed {

bool SpeedProbe::IsReportModelTopoInfo(const std::string &modelName)
{
    (void)modelName;
    return false;
}

void SpeedProbe::ReportModelTopoInfo(const std::string &modelName, const std::string &graph)
{
    (void)modelName, (void)graph;
}

}  // namespace atb_speed
