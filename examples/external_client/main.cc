// raftkv_hello ENDPOINTS: writes hello=world through the raftkv client
// library, reads it back linearizably, prints "hello = world".
#include <iostream>
#include <string>

#include "client/kv_client.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: raftkv_hello HOST:PORT[,HOST:PORT...]\n";
    return 2;
  }
  raftkv::ClientOptions options;
  if (raftkv::Status bad = raftkv::ParseEndpointList(argv[1], &options.endpoints); !bad.ok()) {
    std::cerr << "raftkv_hello: " << bad.message() << "\n";
    return 2;
  }
  raftkv::KvClient client(options);
  grpc::Status s = client.Put("hello", "world");
  if (!s.ok()) {
    std::cerr << "put: " << s.error_message() << "\n";
    return 1;
  }
  std::string value;
  bool found = false;
  s = client.Get("hello", &value, &found);
  if (!s.ok() || !found) {
    std::cerr << "get: " << (s.ok() ? "not found" : s.error_message()) << "\n";
    return 1;
  }
  std::cout << "hello = " << value << "\n";
  return 0;
}
