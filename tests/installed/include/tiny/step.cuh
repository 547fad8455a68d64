// The step of tiny's iota.
#pragma once

namespace tiny {
constexpr int step = 3;
}
