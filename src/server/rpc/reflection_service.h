// Server reflection (grpc.reflection.v1alpha, protos/grpc/reflection) for
// grpcurl and other reflection clients, limited to the public services: it
// lists the services it is given and describes the files that define them
// and their imports; a file or symbol of the members' own protocol
// (package raftkv.internal) is NOT_FOUND, as if the server did not have it.
//
// Served with gRPC's callback API: an open reflection stream holds no
// thread. Each stream answers at most kMaxRequestsPerStream questions.
#pragma once

#include <string>
#include <vector>

#include "proto/reflection.h"

namespace raftkv {

class ReflectionService final : public grpc::reflection::v1alpha::ServerReflection::CallbackService {
 public:
  static constexpr int kMaxRequestsPerStream = 1000;

  // `services`: the full names to list (and the only ones described).
  explicit ReflectionService(std::vector<std::string> services);

  grpc::ServerBidiReactor<grpc::reflection::v1alpha::ServerReflectionRequest,
                          grpc::reflection::v1alpha::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

  // The answer to one question (public for tests).
  void Answer(const grpc::reflection::v1alpha::ServerReflectionRequest& request,
              grpc::reflection::v1alpha::ServerReflectionResponse* response) const;

  // Whether a proto package is kept from reflection clients.
  static bool IsHidden(const std::string& package);

 private:
  const std::vector<std::string> services_;
};

}  // namespace raftkv
