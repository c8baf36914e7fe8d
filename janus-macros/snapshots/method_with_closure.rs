#[allow(unused_mut)]
fn update<A: Act>(mut self: &mut Self, mut grads: &[Tensor], mut lr: f64) {
    #[allow(non_snake_case)]
    let __janus_v_janus_ret;
    {
        #[allow(unused_imports)]
        use ::janus::__private::{
            FixedMutRef as _, FixedOther as _, InOutModule as _, InOutOpaque as _,
            InOutRef as _, OutputModule as _, OutputOpaque as _, ProbeKeyed as _,
            ProbeOpaque as _,
        };
        static __JANUS_FRAGMENT: ::janus::__private::Fragment = ::janus::__private::Fragment::new(::janus::__private::Site {
            function: "update",
            file: ::core::file!(),
            line: ::core::line!(),
            more_lines: 0u32,
            index: 2u32,
            part: 0u32,
            profile: 2u32,
            max_variants: 8u32,
            min_ops: 3u32,
            speculative: true,
            max_failures: 3u32,
            dynamic_dims: true,
            has_loop: true,
        });
        let __janus_w_janus_ret = ::janus::__private::Witness::new();
        match __JANUS_FRAGMENT
            .enter(
                || [
                    (&::janus::__private::Probe(&self)).probe("self"),
                    (&::janus::__private::Probe(&grads)).probe("grads"),
                    (&::janus::__private::Probe(&lr)).probe("lr"),
                ],
                ::janus::__private::Instance::of(&|| ()),
            )
        {
            ::janus::__private::Enter::Body(__janus_scope) => {
                let (__janus_o_janus_ret,) = {
                    #[allow(clippy::redundant_closure_call)]
                    let __janus_ret = (|| -> () {
                        let mut scale = |g: &Tensor| A::default().apply(g) * lr;
                        #[allow(non_snake_case)]
                        let __janus_v_janus_tail;
                        {
                            #[allow(unused_imports)]
                            use ::janus::__private::{
                                FixedMutRef as _, FixedOther as _, InOutModule as _,
                                InOutOpaque as _, InOutRef as _, OutputModule as _,
                                OutputOpaque as _, ProbeKeyed as _, ProbeOpaque as _,
                            };
                            static __JANUS_FRAGMENT: ::janus::__private::Fragment = ::janus::__private::Fragment::new(::janus::__private::Site {
                                function: "update",
                                file: ::core::file!(),
                                line: ::core::line!(),
                                more_lines: 2u32,
                                index: 1u32,
                                part: 0u32,
                                profile: 2u32,
                                max_variants: 8u32,
                                min_ops: 3u32,
                                speculative: false,
                                max_failures: 3u32,
                                dynamic_dims: true,
                                has_loop: true,
                            });
                            let __janus_dyn_lr = ::janus::__private::dynamic_scalar(lr);
                            let __janus_w_janus_tail = ::janus::__private::Witness::new();
                            match __JANUS_FRAGMENT
                                .enter(
                                    || [
                                        (&::janus::__private::Probe(&__janus_dyn_lr)).probe("lr"),
                                        ::janus::__private::probe_or(
                                            (&::janus::__private::Probe(&self.params))
                                                .probe("self.params"),
                                            || (&::janus::__private::Probe(&self)).probe("self"),
                                        ),
                                        (&::janus::__private::Probe(&grads)).probe("grads"),
                                    ],
                                    ::janus::__private::Instance::of(&|| ()),
                                )
                            {
                                ::janus::__private::Enter::Body(__janus_scope) => {
                                    let (__janus_o_janus_tail,) = {
                                        let lr = &__janus_dyn_lr;
                                        let _ = &scale;
                                        let mut scale = |g: &Tensor| A::default().apply(g) * lr;
                                        let __janus_tail = for (w, g) in self
                                            .params
                                            .iter_mut()
                                            .zip(grads)
                                        {
                                            {
                                                #[allow(unused_imports)]
                                                use ::janus::__private::{
                                                    FixedMutRef as _, FixedOther as _, InOutModule as _,
                                                    InOutOpaque as _, InOutRef as _, OutputModule as _,
                                                    OutputOpaque as _, ProbeKeyed as _, ProbeOpaque as _,
                                                };
                                                static __JANUS_FRAGMENT: ::janus::__private::Fragment = ::janus::__private::Fragment::new(::janus::__private::Site {
                                                    function: "update",
                                                    file: ::core::file!(),
                                                    line: ::core::line!(),
                                                    more_lines: 0u32,
                                                    index: 0u32,
                                                    part: 0u32,
                                                    profile: 2u32,
                                                    max_variants: 8u32,
                                                    min_ops: 3u32,
                                                    speculative: false,
                                                    max_failures: 3u32,
                                                    dynamic_dims: true,
                                                    has_loop: false,
                                                });
                                                let __janus_dyn_lr = ::janus::__private::dynamic_scalar(lr);
                                                match __JANUS_FRAGMENT
                                                    .enter(
                                                        || [
                                                            (&::janus::__private::Probe(&__janus_dyn_lr)).probe("lr"),
                                                            (&::janus::__private::Probe(&*w)).probe("*w"),
                                                            (&::janus::__private::Probe(&g)).probe("g"),
                                                        ],
                                                        ::janus::__private::Instance::of(&|| ()),
                                                    )
                                                {
                                                    ::janus::__private::Enter::Body(__janus_scope) => {
                                                        {
                                                            let lr = &__janus_dyn_lr;
                                                            let _ = &scale;
                                                            let mut scale = |g: &Tensor| A::default().apply(g) * lr;
                                                            ::janus::__private::branch(1u32, 3u32, true);
                                                            *w = &*w - scale(g);
                                                        }
                                                        __janus_scope
                                                            .exit(
                                                                ::std::vec![
                                                                    (&& & ::janus::__private::Witness::of(& * w)).output(& * w,
                                                                    "*w"), (&& ::janus::__private::Witness::of(& g))
                                                                    .fixed_output(& g, "g")
                                                                ],
                                                            );
                                                    }
                                                    ::janus::__private::Enter::Replay(mut __janus_out) => {
                                                        (&&&::janus::__private::Witness::of(&*w))
                                                            .restore(&mut *w, &mut __janus_out);
                                                    }
                                                }
                                            }
                                        };
                                        __janus_w_janus_tail.bind(&__janus_tail);
                                        (__janus_tail,)
                                    };
                                    __janus_scope
                                        .exit(
                                            ::std::vec![
                                                (&& & ::janus::__private::Witness::of(& self.params))
                                                .inout_output(& self.params, "self.params"), (&& &
                                                __janus_w_janus_tail).output(& __janus_o_janus_tail,
                                                "return value")
                                            ],
                                        );
                                    __janus_v_janus_tail = __janus_o_janus_tail;
                                }
                                ::janus::__private::Enter::Replay(mut __janus_out) => {
                                    (&&&::janus::__private::Witness::of(&self.params))
                                        .inout_restore(&mut self.params, &mut __janus_out);
                                    __janus_v_janus_tail = (&&&__janus_w_janus_tail)
                                        .take(&mut __janus_out);
                                }
                            }
                        }
                        #[allow(unused_variables, non_snake_case)]
                        let mut __janus_tail = __janus_v_janus_tail;
                        __janus_tail
                    })();
                    __janus_w_janus_ret.bind(&__janus_ret);
                    (__janus_ret,)
                };
                __janus_scope
                    .exit(
                        ::std::vec![
                            (&& & ::janus::__private::Witness::of(& self)).inout_output(&
                            self, "self"), (&& & __janus_w_janus_ret).output(&
                            __janus_o_janus_ret, "return value")
                        ],
                    );
                __janus_v_janus_ret = __janus_o_janus_ret;
            }
            ::janus::__private::Enter::Replay(mut __janus_out) => {
                (&&&::janus::__private::Witness::of(&self))
                    .inout_restore(&mut self, &mut __janus_out);
                __janus_v_janus_ret = (&&&__janus_w_janus_ret).take(&mut __janus_out);
            }
        }
    }
    #[allow(unused_variables, non_snake_case)]
    let mut __janus_ret = __janus_v_janus_ret;
    __janus_ret
}
