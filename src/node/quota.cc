// RaftNode::CheckQuota: the backend quota and the NOSPACE alarm it raises
// (node.h).
#include <chrono>
#include <string>

#include <glog/logging.h>

#include "kv/kv_requests.h"
#include "node/node.h"

namespace raftkv {

Status RaftNode::CheckQuota(const Command& command) {
  const int64_t quota = options_.quota_backend_bytes;
  if (quota <= 0) return Status::OK();
  const size_t cost = QuotaCost(command);
  if (cost == 0) return Status::OK();
  const size_t used = state_machine_->StateBytes();
  if (used + cost <= static_cast<uint64_t>(quota)) return Status::OK();
  bool raised = false;
  for (const KvStateMachine::Alarm& a : state_machine_->Alarms()) {
    raised = raised || (a.member == id() && a.type == KvStateMachine::kAlarmNoSpace);
  }
  // Raised by the leader (a follower's proposal would be refused: its
  // writes reach here only when it does not forward them, and fail anyway).
  if (!raised && KnownLeader() == id() && !raising_nospace_.exchange(true)) {
    LOG(WARNING) << "the store holds " << used << " bytes, its quota is " << quota
                 << " (--quota_backend_bytes): raising the NOSPACE alarm; writes that add data are "
                    "refused until an operator clears it (etcdctl alarm disarm) after deleting or "
                    "compacting";
    Command alarm;
    alarm.set_op(Command::ALARM);
    alarm.set_alarm_action(1);  // ACTIVATE
    alarm.set_alarm_type(KvStateMachine::kAlarmNoSpace);
    alarm.set_alarm_member(id());
    Propose(alarm.SerializeAsString(), Clock::now() + std::chrono::seconds(10), [this](Outcome out) {
      LOG_IF(WARNING, !out.status.ok()) << "raising the NOSPACE alarm: " << out.status.ToString();
      raising_nospace_.store(false);
    });
  }
  return Status(Status::Code::kResourceExhausted,
                "the store would exceed its space quota of " + std::to_string(quota) + " bytes (it holds " +
                    std::to_string(used) + "): database space exceeded",
                Status::Reason::kNoSpace);
}

}  // namespace raftkv
