// mlasim stand-in: the v1.2 planner includes this header but uses nothing from it.
#pragma once
