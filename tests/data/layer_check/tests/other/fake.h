// A helper of another test folder.
#pragma once
