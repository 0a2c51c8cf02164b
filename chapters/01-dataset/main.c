/* chapter-1: placeholder until the dataset chapter's program lands. */
#include <stdio.h>

int main(void)
{
    puts("chapter 1 (dataset): not written yet");
    return 0;
}
